// The radiologist's worklist: GET /v1/discrepancies, one row per image and finding where
// the report and the model disagree; open the image, review the row, export as CSV.
// Loaded after app.js, whose helpers (el, api, apiJson, apiObjectUrl, needKey, showPrediction,
// selectLabel, setStatus, renderHighlighted) it uses; no inline script.
"use strict";

// The sort runs on the server (keyset paging): `order` is null for the sort's own direction
// (newest, probability and job descending; finding and review ascending) or "asc"/"desc".
const worklist = { rows: [], cursor: null, sort: { key: "newest", order: null },
  thumbs: new Map(), request: 0 };
const WL_PAGE = 50;
const VERDICTS = { "": "not reviewed", agree_report: "agree with report",
  agree_model: "agree with model", dismissed: "dismissed" };

function wlQuery(extra) {
  const params = new URLSearchParams({ limit: String(WL_PAGE) });
  const label = $("wl-filter-label").value;
  const job = $("wl-filter-job").value;
  if (label) params.set("label", label);
  if (job) params.set("job_id", job);
  if ($("wl-filter-unreviewed").checked) params.set("unreviewed", "true");
  params.set("sort", worklist.sort.key);
  if (worklist.sort.order) params.set("order", worklist.sort.order);
  for (const [k, v] of Object.entries(extra || {})) params.set(k, String(v));
  return params;
}

function wlDecision(image) {
  // A decision is shown as a decision, with its threshold: never a bare probability.
  const p = image.probability;
  const thr = image.threshold;
  const word = image.positive ? "positive" : "negative";
  if (p === null || p === undefined) return { word, detail: "" };
  let detail = `p ${p.toFixed(3)}`;
  if (thr !== null && thr !== undefined) {
    const n = decisionNumbers(p, thr, image.positive);
    detail = `p ${n.p} ${n.sign} threshold ${n.thr}`;
  }
  return { word, detail };
}

function wlReportText(report) {
  const finding = report.finding || {};
  const evidence = Object.entries(finding)
    .filter(([k, v]) => k !== "status" && v !== null && v !== undefined && v !== "" &&
      !(Array.isArray(v) && !v.length))
    .map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(", ") : v}`).join("; ");
  return { word: report.status, detail: evidence || (report.source ? `from ${report.source}` : "") };
}

function wlKey(d) { return `${d.item_id}:${d.label}`; }

function wlStack(main, detail, cls) {
  // Long details (UIDs) stay on one line, ellipsised; the whole text is the tooltip.
  return el("div", {}, el("span", { class: cls || "", text: main }),
    detail ? el("div", { class: "hint wl-detail", text: detail, title: detail }) : "");
}

function wlReviewCell(d) {
  const select = el("select", { class: "wl-verdict", "aria-label": `review of ${d.label}` });
  for (const [value, text] of Object.entries(VERDICTS)) {
    select.append(el("option", { value, text }));
  }
  select.value = (d.review && d.review.decision) || "";
  const note = el("input", { type: "text", class: "wl-note", placeholder: "note",
    "aria-label": "note", maxlength: 2000, value: (d.review && d.review.note) || "" });
  const save = el("button", { type: "button", class: "wl-save", text: "Save" });
  const who = el("div", { class: "hint wl-who", text: d.review ?
    `${d.review.reviewer}, ${fmtTime(d.review.reviewed_at)}` : "" });
  save.addEventListener("click", () => saveReview(d, select.value, note.value, who));
  return el("td", { class: "wl-review" }, select, note, save, who);
}

async function saveReview(d, decision, note, who) {
  try {
    const review = await apiJson(
      `/v1/discrepancies/items/${d.item_id}/reviews/${encodeURIComponent(d.label)}`, {
        method: "PUT", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ decision: decision || null, note: note || null }),
      });
    d.review = review.decision || review.note ? review : null;
    who.textContent = `${review.reviewer}, ${fmtTime(review.reviewed_at)}`;
    setStatus("worklist-status", `Review of ${d.label} on ${d.item} saved.`);
  } catch (error) {
    setStatus("worklist-status", `review: ${error.message}`, true);
  }
}

async function wlThumb(d, cell) {
  if (!d.viewable) {
    cell.append(el("span", { class: "hint", text: "no image kept" }));
    return;
  }
  const open = el("button", { type: "button", class: "wl-open", title: "open with heatmap and boxes",
    "aria-label": `open ${d.item}` });
  cell.append(open);
  open.addEventListener("click", () => openRow(d));
  let url = worklist.thumbs.get(d.item_id);
  if (!url) {
    try {
      url = await apiObjectUrl(`/v1/discrepancies/items/${d.item_id}/image.png?max_size=96`);
    } catch (error) {
      open.textContent = "open";
      return;
    }
    worklist.thumbs.set(d.item_id, url);
  }
  open.append(el("img", { src: url, alt: `thumbnail of ${d.item}` }));
}

async function openRow(d) {
  setStatus("worklist-status", `Opening ${d.item}…`);
  try {
    const p = await apiJson(`/v1/discrepancies/items/${d.item_id}/prediction`, { method: "POST" });
    view.truth = null;
    await showPrediction(p);
    if (d.label in p.heatmaps) await selectLabel(d.label);
    await showRowReport(d);
    // Shown smaller than the film (and than the 1024 px preview): the job's file is gone,
    // so the image is the model input the batch kept.
    const base = $("base-image");
    const small = Math.max(base.naturalWidth, base.naturalHeight) <
      Math.min(1024, Math.max(p.image.rows, p.image.columns));
    setStatus("predict-status", `${d.item}: ${d.label}, ${d.reason}` + (small ?
      " (shown at the model's input size: the job's file is no longer on the server)" : ""));
    for (const row of $("worklist-table").querySelectorAll("tbody tr")) {
      row.classList.toggle("selected", row.dataset.row === wlKey(d));
    }
    $("predict").scrollIntoView();
    setStatus("worklist-status", `${d.item} opened above.`);
  } catch (error) {
    setStatus("worklist-status", `open ${d.item}: ${error.message}`, true);
  }
}

async function showRowReport(d) {
  // Batch results keep no report text: it is read again from the job's source (reports
  // CSV or structured report) and labeled now; when the source is gone, the page says so.
  const panel = $("row-report");
  const box = $("row-report-text");
  $("row-report-title").textContent = `Report: ${d.label} (${d.report.status})`;
  let r;
  try {
    r = await apiJson(`/v1/discrepancies/items/${d.item_id}/report?` +
      new URLSearchParams({ label: d.label }));
  } catch (error) {
    r = { text: null, origin: null, missing: `The report could not be read: ${error.message}` };
  }
  panel.classList.toggle("missing", r.text === null);
  if (r.text === null) {
    box.replaceChildren(el("span", { text: `Report not available: ${r.missing}` }));
    $("row-report-origin").textContent = r.origin ? `From the job's ${r.origin}.` : "";
  } else {
    renderHighlighted(box, r.text, r.labels.mentions, d.label);
    const focus = box.querySelector("mark.focus");
    const evidence = focus ? `; the ${d.label} evidence is outlined.` :
      `; it does not mention ${d.label}.`;
    $("row-report-origin").textContent = `Read again now from the job's ${r.origin}` +
      (r.changed ? `; it now reads ${r.labels.labels[d.label]}, not ${r.status} as when ` +
        "the batch ran." : evidence);
    if (focus) box.scrollTop = Math.max(0, focus.offsetTop - box.offsetTop - 24);
  }
  panel.hidden = false;
}

function renderWorklist() {
  const body = $("worklist-table").querySelector("tbody");
  body.replaceChildren();
  if (!worklist.rows.length) {
    body.append(el("tr", { class: "none" }, el("td", { colspan: 8,
      text: "No disagreements in the batch results read." })));
  }
  for (const d of worklist.rows) {
    const model = wlDecision(d.image);
    const report = wlReportText(d.report);
    const side = d.image.side && d.image.side !== "unknown" ? `, ${d.image.side}` : "";
    const thumb = el("td", { class: "wl-thumb" });
    const row = el("tr", { "data-row": wlKey(d), "data-item": d.item_id, "data-label": d.label,
      "data-p": d.image.probability ?? "" },
      thumb,
      el("td", {}, wlStack(d.accession_number ? `Acc. ${d.accession_number}` : "no accession",
        d.study_instance_uid ? `Study UID ${d.study_instance_uid}` : "")),
      el("td", { class: "wl-file", title: d.item }, wlStack(d.item,
        [d.view_position, d.sop_instance_uid && `SOP ${d.sop_instance_uid}`]
          .filter(Boolean).join(" · "))),
      el("td", { text: d.label }),
      el("td", {}, wlStack(report.word, report.detail, report.word)),
      el("td", { "data-decision": model.word },
        wlStack(model.word + side, model.detail, model.word)),
      el("td", { text: d.reason }),
      wlReviewCell(d));
    body.append(row);
    wlThumb(d, thumb);
  }
  $("wl-more").hidden = worklist.cursor === null;
}

function wlLabels() {
  const select = $("wl-filter-label");
  if (select.options.length > 1) return;
  for (const label of (CONFIG.model && CONFIG.model.labels) || []) {
    select.append(el("option", { value: label, text: label }));
  }
}

function wlJobs(jobs) {
  const select = $("wl-filter-job");
  const current = select.value;
  select.replaceChildren(el("option", { value: "", text: "any job" }));
  for (const job of jobs) {
    select.append(el("option", { value: job.id, text: `${fmtTime(job.created_at)} (${job.state})` }));
  }
  select.value = jobs.some((j) => j.id === current) ? current : "";
}

async function loadWorklist(more) {
  const status = $("worklist-status");
  if (needKey()) { status.textContent = "Enter the API key to load the worklist."; return; }
  // Every change of filter loads at once; an answer to an earlier request is dropped.
  const request = ++worklist.request;
  setStatus("worklist-status", "Loading…");
  try {
    const extra = more && worklist.cursor !== null ? { cursor: worklist.cursor } : {};
    const data = await apiJson(`/v1/discrepancies?${wlQuery(extra)}`);
    if (request !== worklist.request) return;
    worklist.rows = more ? worklist.rows.concat(data.items) : data.items;
    worklist.cursor = data.next_cursor;
    renderWorklist();
    setStatus("worklist-status", `${worklist.rows.length} row(s)` +
      (worklist.cursor === null ? ", every batch result read." : "; more below."));
  } catch (err) {
    if (request === worklist.request) {
      setStatus("worklist-status", `Could not load the worklist: ${err.message}`, true);
    }
  }
}

async function exportWorklist() {
  try {
    const params = wlQuery();
    params.delete("limit");
    const url = await apiObjectUrl(`/v1/discrepancies.csv?${params}`);
    const a = el("a", { href: url, download: "worklist.csv" });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (error) {
    setStatus("worklist-status", `export: ${error.message}`, true);
  }
}

const WL_DESCENDING = { newest: true, finding: false, probability: true, job: true,
  review: false };

function wlDescending() {
  const { key, order } = worklist.sort;
  return order ? order === "desc" : WL_DESCENDING[key];
}

function wlSortBy(key, order) {
  worklist.sort = { key, order };
  $("wl-sort").value = key;
  for (const th of $("worklist-table").querySelectorAll("th[data-sort]")) {
    th.setAttribute("aria-sort", th.dataset.sort !== key ? "none" :
      (wlDescending() ? "descending" : "ascending"));
  }
  loadWorklist(false); // a new order starts from its first page (cursors are per sort)
}

function setupWorklist() {
  wlLabels();
  $("worklist-refresh").addEventListener("click", () => loadWorklist(false));
  $("wl-more").addEventListener("click", () => loadWorklist(true));
  $("wl-export").addEventListener("click", exportWorklist);
  for (const id of ["wl-filter-label", "wl-filter-job", "wl-filter-unreviewed"]) {
    $(id).addEventListener("change", () => loadWorklist(false));
  }
  $("wl-sort").addEventListener("change", () => wlSortBy($("wl-sort").value, null));
  for (const th of $("worklist-table").querySelectorAll("th[data-sort]")) {
    // A header sorts by its column; clicked again, the other way round.
    th.addEventListener("click", () => {
      const key = th.dataset.sort;
      const again = worklist.sort.key === key;
      wlSortBy(key, again ? (wlDescending() ? "asc" : "desc") : null);
    });
  }
  loadWorklist(false);
}

document.addEventListener("cxr:key", () => loadWorklist(false));
// A batch job that finishes adds rows: app.js announces every jobs refresh (refreshJobs).
document.addEventListener("cxr:jobs", (event) => {
  wlJobs(event.detail.jobs);
  if (event.detail.finished.length) loadWorklist(false);
});
setupWorklist();
