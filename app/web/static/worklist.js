// Quality review: GET /v1/discrepancies, the report and the image side by side.
// Loaded after app.js, whose api helpers (apiJson, needKey) it uses; no inline script.
"use strict";

function wlCell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
  return td;
}

function wlBoxes(image) {
  const boxes = image.boxes || [];
  if (!boxes.length) return "no box";
  return boxes.map((b) => `${b.side} ${b.zone} (x ${Math.round(b.x)}, y ${Math.round(b.y)}, ` +
    `${Math.round(b.width)} x ${Math.round(b.height)})`).join("; ");
}

async function loadWorklist() {
  const status = document.getElementById("worklist-status");
  const body = document.querySelector("#worklist-table tbody");
  if (!status || !body) return;
  if (needKey()) { status.textContent = "Enter the API key to load the worklist."; return; }
  status.textContent = "Loading…";
  try {
    const data = await apiJson("/v1/discrepancies?limit=200");
    body.replaceChildren();
    if (!data.items.length) {
      const row = body.insertRow();
      row.className = "none";
      const td = wlCell(row, `No disagreements in ${data.scanned} batch results.`);
      td.colSpan = 6;
    }
    for (const d of data.items) {
      const row = body.insertRow();
      wlCell(row, d.accession_number || d.study_instance_uid || d.item);
      wlCell(row, d.label);
      wlCell(row, d.report.status + (d.report.laterality ? `, ${d.report.laterality}` : ""),
        d.report.status);
      const p = d.image.probability;
      wlCell(row, (d.image.positive ? "positive" : "negative") +
        (p === null || p === undefined ? "" : ` (p ${p.toFixed(2)})`) +
        (d.image.side && d.image.side !== "unknown" ? `, ${d.image.side}` : ""),
        d.image.positive ? "positive" : "negative");
      wlCell(row, wlBoxes(d.image));
      wlCell(row, d.reason);
    }
    status.textContent = `${data.items.length} disagreement(s) in ${data.scanned} batch results.`;
  } catch (err) {
    status.textContent = `Could not load the worklist: ${err.message}`;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const button = document.getElementById("worklist-refresh");
  if (button) button.addEventListener("click", loadWorklist);
  loadWorklist();
});
