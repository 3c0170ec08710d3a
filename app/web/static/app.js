// cxr web page: plain JavaScript, no dependencies, talks to the /v1 JSON API.
"use strict";

const CONFIG = JSON.parse(document.body.dataset.config || "{}");
const KEY_NAME = "cxr-api-key";
// The overlay renderer's colours (models.overlay.PALETTE), served in the page's config.
const PALETTE = CONFIG.palette && CONFIG.palette.length ? CONFIG.palette : ["#ff6b5e"];
const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function svgEl(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

function setStatus(id, text, error) {
  const node = $(id);
  node.textContent = text || "";
  node.classList.toggle("error", Boolean(error));
}

// A decision beside its threshold, printed with as many digits as it takes for the printed
// numbers to say the same as the decision ("p 1.000 / thr 1.00" read both ways).
function decisionNumbers(p, thr, positive) {
  let dp = 3;
  let dt = 2;
  const agrees = () => {
    const [shownP, shownThr] = [Number(p.toFixed(dp)), Number(thr.toFixed(dt))];
    return positive ? shownP >= shownThr : shownP < shownThr;
  };
  while (!agrees() && dp < 8) { dp += 1; dt = Math.min(dp, 8); }
  return { p: p.toFixed(dp), thr: thr.toFixed(dt), sign: positive ? "≥" : "<" };
}

// --- API access (X-API-Key from sessionStorage) ----------------------------------------

class ApiError extends Error {
  constructor(status, detail) {
    super(typeof detail === "string" ? detail : JSON.stringify(detail));
    this.status = status;
  }
}

function apiKey() { return sessionStorage.getItem(KEY_NAME) || ""; }

function needKey() { return CONFIG.apiKeyRequired && !apiKey(); }

async function api(path, options) {
  const opts = Object.assign({}, options || {});
  const headers = new Headers(opts.headers || {});
  if (apiKey()) headers.set("X-API-Key", apiKey());
  opts.headers = headers;
  if (needKey()) {
    showKeyBar("Enter the API key first.");
    throw new ApiError(401, "an API key is required");
  }
  const response = await fetch(path, opts);
  if (response.status === 401 || response.status === 403) {
    sessionStorage.removeItem(KEY_NAME);
    showKeyBar(response.status === 403 ? "That key was refused; enter a valid key." :
      "Enter the API key.");
  }
  if (!response.ok) {
    let detail = response.statusText;
    try { detail = (await response.json()).detail; } catch (e) { /* not JSON */ }
    throw new ApiError(response.status, detail);
  }
  return response;
}

async function apiJson(path, options) { return (await api(path, options)).json(); }

async function apiObjectUrl(path) {
  const blob = await (await api(path)).blob();
  return URL.createObjectURL(blob);
}

function showKeyBar(message) {
  $("keybar").hidden = false;
  $("apikey-label").textContent = CONFIG.apiKeyRequired ? "This service requires an API key." :
    "API key (optional: this service accepts requests without one).";
  $("apikey-status").textContent = message || (apiKey() ? "A key is set for this tab." : "");
  $("apikey-input").focus();
}

function setupKeyBar() {
  $("keybar").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = $("apikey-input").value.trim();
    if (!key) return;
    sessionStorage.setItem(KEY_NAME, key);
    $("apikey-input").value = "";
    $("keybar").hidden = true;
    refreshJobs();
    document.dispatchEvent(new CustomEvent("cxr:key"));
  });
  $("apikey-forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_NAME);
    showKeyBar("Key forgotten.");
  });
  $("apikey-link").addEventListener("click", (event) => {
    event.preventDefault();
    showKeyBar("");
  });
  if (needKey()) showKeyBar("");
}

// --- Predict ---------------------------------------------------------------------------

const view = { prediction: null, label: "", overlays: new Map(), baseUrl: null, truth: null };

function colorOf(label) {
  // By the label's place in the model's list, as models.overlay.colour_of does.
  const p = view.prediction;
  const labels = (p && ((p.model && p.model.labels) || Object.keys(p.probabilities))) || [];
  const i = Math.max(0, labels.indexOf(label));
  return PALETTE[i % PALETTE.length];
}

async function predictFile(file, truth) {
  if (!file) return;
  view.truth = truth || null; // a demo phantom's true boxes, from its generator
  if (!CONFIG.model) {
    setStatus("predict-status", "No image model is loaded on this service.", true);
    return;
  }
  setStatus("predict-status", `Predicting ${file.name}…`);
  const form = new FormData();
  form.append("file", file, file.name);
  try {
    const prediction = await apiJson("/v1/images/predict", { method: "POST", body: form });
    await showPrediction(prediction);
    const total = prediction.timings.total;
    setStatus("predict-status", `${file.name}: done` +
      (total !== undefined ? ` in ${Math.round(total * 1000)} ms` : ""));
  } catch (error) {
    setStatus("predict-status", `${file.name}: ${error.message}`, true);
  }
}

function clearOverlays() {
  for (const url of view.overlays.values()) URL.revokeObjectURL(url);
  view.overlays.clear();
  if (view.baseUrl) URL.revokeObjectURL(view.baseUrl);
  view.baseUrl = null;
}

async function showPrediction(p) {
  clearOverlays();
  view.prediction = p;
  $("row-report").hidden = true; // a worklist row's report: shown again by openRow
  const notice = $("predict-notice");
  notice.hidden = !p.demo;
  notice.textContent = p.notice || (p.demo ? "DEMO MODEL" : "");
  view.baseUrl = await apiObjectUrl(`/v1/predictions/${encodeURIComponent(p.id)}/image.png`);
  const base = $("base-image");
  await new Promise((resolve, reject) => {
    base.onload = resolve;
    base.onerror = () => reject(new Error("the image could not be shown"));
    base.src = view.baseUrl;
    $("stage").hidden = false;
    $("stage-empty").hidden = true;
  });
  fitStage();
  drawBoxes();
  const select = $("heatmap-label");
  select.replaceChildren(el("option", { value: "", text: "none" }));
  const heatLabels = Object.keys(p.heatmaps);
  for (const label of heatLabels) select.append(el("option", { value: label, text: label }));
  $("overlay-controls").disabled = false;
  renderProbabilities(p);
  renderBoxTable(p);
  renderCard("image-info", {
    rows: p.image.rows, columns: p.image.columns, modality: p.image.modality,
    "study UID": p.image.study_instance_uid, "SOP instance UID": p.image.sop_instance_uid,
    sha256: p.image.sha256 && p.image.sha256.slice(0, 16) + "…", prediction: p.id,
  });
  renderCard("model-card", modelCardFields(p.model));
  renderWarnings(p.model.warnings || []);
  renderCard("timings", Object.fromEntries(
    Object.entries(p.timings).map(([k, v]) => [k, `${(v * 1000).toFixed(1)} ms`])));
  // Start on the most probable positive finding that has a heatmap.
  const first = p.positive.filter((l) => l in p.heatmaps)
    .sort((a, b) => p.probabilities[b] - p.probabilities[a])[0] || heatLabels[0] || "";
  await selectLabel(first);
}

function modelCardFields(card) {
  const metrics = card.metrics || {};
  const validation = metrics.validation || {};
  return {
    name: card.name, version: card.version, demo: card.demo ? "YES: not for clinical use" : "no",
    "intended use": card.intended_use, "training data": card.training_data,
    labels: (card.labels || []).length, "validation mean AUC": validation.mean_auc,
    "validation AUC per label": Object.entries(validation.per_label || {})
      .map(([k, v]) => `${k} ${v.auc === null || v.auc === undefined ? "n/a" : v.auc}`)
      .join(", "),
    warnings: (card.warnings || []).join("\n"),
    created: card.created, code: card.code_version,
  };
}

function renderWarnings(warnings) {
  // A label the model did not learn (validation AUC near chance, temperature at its cap)
  // is said next to the probabilities, not only in the closed model card.
  const list = $("model-warnings");
  list.replaceChildren(...warnings.map((w) => el("li", { text: w })));
  list.hidden = !warnings.length;
}

function renderCard(id, fields) {
  const box = $(id);
  const dl = box.querySelector("dl");
  dl.replaceChildren();
  for (const [k, v] of Object.entries(fields)) {
    if (v === null || v === undefined || v === "") continue;
    dl.append(el("dt", { text: k }), el("dd", { text: v }));
  }
  box.hidden = false;
}

function renderProbabilities(p) {
  const tbody = $("prob-table").querySelector("tbody");
  tbody.replaceChildren();
  const thresholds = (p.model && p.model.thresholds) || {};
  const labels = Object.keys(p.probabilities)
    .sort((a, b) => p.probabilities[b] - p.probabilities[a]);
  for (const label of labels) {
    const prob = p.probabilities[label];
    const thr = thresholds[label];
    const positive = p.positive.includes(label);
    const bar = el("div", { class: "bar" }, el("div", { class: "fill" }));
    bar.firstChild.style.width = `${(prob * 100).toFixed(1)}%`;
    if (thr !== undefined) {
      const tick = el("div", { class: "tick", title: `threshold ${thr.toFixed(3)}` });
      tick.style.left = `calc(${(thr * 100).toFixed(1)}% - 1px)`;
      bar.append(tick);
    }
    // The decision, with the threshold it was taken at: "p 1.000" beside "thr 1.00" read
    // both ways, "negative (< 1.00)" does not.
    const word = positive ? "positive" : "negative";
    const row = el("tr", { class: positive ? "positive" : "", "data-label": label },
      el("td", {}, el("span", { class: "swatch" }), label + (positive ? " ●" : "")),
      el("td", { title: `p ${prob.toFixed(4)}` }, bar),
      el("td", { class: "num", text: thr === undefined ? prob.toFixed(3) :
        decisionNumbers(prob, thr, positive).p }),
      el("td", { class: "decision", "data-decision": word }, el("span", { text: word }),
        thr === undefined ? "" : el("span", { class: "thr",
          text: ` ${positive ? "≥" : "<"} ${decisionNumbers(prob, thr, positive).thr}` })));
    row.querySelector(".swatch").style.background = colorOf(label);
    row.title = label in p.heatmaps ? "show this heatmap" : "no heatmap (not positive)";
    row.addEventListener("click", () => { if (label in p.heatmaps) selectLabel(label); });
    tbody.append(row);
  }
  $("prob-table").hidden = false;
}

function renderBoxTable(p) {
  const tbody = $("box-table").querySelector("tbody");
  tbody.replaceChildren();
  for (const [i, b] of p.boxes.entries()) {
    const row = el("tr", { "data-box": i, "data-label": b.label },
      el("td", {}, el("span", { class: "swatch" }), b.label),
      el("td", { class: "num", text: b.score.toFixed(3) }),
      el("td", { class: "num", text: [b.x, b.y, b.width, b.height].map(Math.round).join(", ") }));
    row.querySelector(".swatch").style.background = colorOf(b.label);
    row.addEventListener("mouseenter", () => highlightBox(i, true));
    row.addEventListener("mouseleave", () => highlightBox(i, false));
    tbody.append(row);
  }
  if (!p.boxes.length) tbody.append(el("tr", {}, el("td", { colspan: 3, text: "no boxes" })));
  $("box-table").hidden = false;
}

function highlightBox(i, on) {
  const rect = $("box-layer").querySelector(`rect[data-box="${i}"]`);
  if (rect) rect.classList.toggle("active", on);
}

function drawBoxes() {
  // The SVG's user space is the original image's pixel grid, so boxes need no scaling.
  const p = view.prediction;
  const layer = $("box-layer");
  layer.replaceChildren();
  layer.setAttribute("viewBox", `0 0 ${p.image.columns} ${p.image.rows}`);
  // Captions about 14 screen pixels high whatever the image's size and zoom.
  const shown = $("base-image").clientWidth;
  const font = shown > 0 ? 14 * p.image.columns / shown :
    Math.max(10, Math.round(Math.max(p.image.columns, p.image.rows) / 45));
  for (const [i, b] of p.boxes.entries()) {
    const color = colorOf(b.label);
    const rect = svgEl("rect", { x: b.x, y: b.y, width: b.width, height: b.height,
      stroke: color, class: "box", "data-box": i, "data-label": b.label });
    const title = svgEl("title", {});
    title.textContent = `${b.label} ${b.score.toFixed(2)}`;
    rect.append(title);
    const text = svgEl("text", { x: b.x + 2, y: Math.max(font, b.y - 4), fill: color,
      "font-size": font, class: "box-label", "data-box": i, "data-label": b.label });
    text.textContent = `${b.label} ${b.score.toFixed(2)}`;
    layer.append(rect, text);
  }
  const truth = view.truth && view.truth.columns === p.image.columns &&
    view.truth.rows === p.image.rows ? view.truth.boxes : [];
  const dash = Math.max(2, Math.max(p.image.columns, p.image.rows) / 60);
  for (const [i, b] of truth.entries()) {
    // Dashed: where the phantom generator drew the lesion (the answer the model should give).
    const color = colorOf(b.label);
    const rect = svgEl("rect", { x: b.x, y: b.y, width: b.width, height: b.height,
      stroke: color, class: "truth", "data-truth": i, "data-truth-label": b.label,
      "stroke-dasharray": `${dash} ${dash * 0.6}` });
    const title = svgEl("title", {});
    title.textContent = `${b.label}: true box`;
    rect.append(title);
    const text = svgEl("text", { x: b.x + 2, y: b.y + b.height + font, fill: color,
      "font-size": font, class: "truth-label", "data-truth": i });
    text.textContent = `${b.label} (true)`;
    layer.append(rect, text);
  }
  $("truth-control").hidden = !truth.length;
  applyOverlayStyle();
}

function layoutCaptions() {
  // Greedy placement, best box first: each caption goes to the first of a few spots near
  // its box (above, inside the top, below, then further down) where its on-screen extent
  // overlaps no caption already placed, so captions stay readable when boxes are close.
  const p = view.prediction;
  if (!p) return;
  const layer = $("box-layer");
  if (layer.style.display === "none") return;
  const placed = [];
  const nodes = [...layer.querySelectorAll("text")]
    .filter((t) => t.style.display !== "none");
  const free = (r) => !placed.some((o) => r.left < o.right - 0.5 && o.left < r.right - 0.5 &&
    r.top < o.bottom - 0.5 && o.top < r.bottom - 0.5);
  for (const text of nodes) {
    const font = Number(text.getAttribute("font-size"));
    const i = text.dataset.box !== undefined ? Number(text.dataset.box) : null;
    const b = i !== null ? p.boxes[i] : view.truth.boxes[Number(text.dataset.truth)];
    const spots = i !== null ? [b.y - 4, b.y + font + 2, b.y + b.height + font + 2] :
      [b.y + b.height + font + 2, b.y - 4, b.y + font + 2];
    for (let k = 1; k <= 16; k += 1) spots.push(spots[0] + k * font * 1.3);
    const width = text.getComputedTextLength ? text.getComputedTextLength() : 0;
    text.setAttribute("x", Math.min(Math.max(0, b.x + 2), Math.max(0, p.image.columns - width)));
    let rect = null;
    for (const y of spots) {
      text.setAttribute("y", Math.min(Math.max(font, y), p.image.rows));
      const r = text.getBoundingClientRect();
      if (free(r)) {
        rect = r;
        break;
      }
    }
    if (rect) placed.push(rect);
    else text.style.display = "none"; // nowhere free: the box table still lists it
  }
}

function fitStage() {
  // Scale the image to the largest size that fits the viewer (small images are enlarged),
  // keeping the original aspect ratio; heatmap and boxes layers follow the stage.
  const p = view.prediction;
  if (!p) return;
  const wrap = $("stage-wrap");
  const width = wrap.clientWidth - 12;
  const height = wrap.clientHeight - 12;
  const aspect = p.image.columns / p.image.rows;
  let w = width;
  let h = width / aspect;
  if (h > height) {
    h = height;
    w = height * aspect;
  }
  $("stage").style.width = `${Math.max(1, Math.floor(w))}px`;
  $("stage").style.height = `${Math.max(1, Math.floor(h))}px`;
}

function overlaySize() {
  const base = $("base-image");
  const side = Math.max(base.clientWidth, base.clientHeight) * (window.devicePixelRatio || 1);
  return Math.min(1024, Math.max(64, Math.round(side)));
}

async function selectLabel(label) {
  view.label = label;
  $("heatmap-label").value = label;
  for (const row of $("prob-table").querySelectorAll("tbody tr")) {
    row.classList.toggle("selected", row.dataset.label === label);
  }
  const img = $("heatmap-image");
  const p = view.prediction;
  if (!label || !p || !(label in p.heatmaps)) {
    img.removeAttribute("src");
    img.hidden = true;
    applyOverlayStyle();
    return;
  }
  let url = view.overlays.get(label);
  if (!url) {
    const path = p.heatmaps[label];
    const sep = path.includes("?") ? "&" : "?";
    try {
      // Heatmap only: the page draws the boxes itself (an SVG layer that can be toggled).
      url = await apiObjectUrl(`${path}${sep}max_size=${overlaySize()}&boxes=false`);
    } catch (error) {
      setStatus("predict-status", `heatmap ${label}: ${error.message}`, true);
      return;
    }
    view.overlays.set(label, url);
  }
  if (view.label !== label) return; // another label was chosen meanwhile
  img.src = url;
  img.dataset.label = label;
  applyOverlayStyle();
}

function applyOverlayStyle() {
  const img = $("heatmap-image");
  img.hidden = !$("heatmap-toggle").checked || !img.getAttribute("src");
  img.style.opacity = String($("heatmap-opacity").value / 100);
  $("box-layer").style.display = $("boxes-toggle").checked ? "" : "none";
  // By default only the boxes of the finding whose heatmap is shown: less clutter.
  const all = $("boxes-scope").value === "all";
  for (const node of $("box-layer").querySelectorAll("[data-label]")) {
    node.style.display = all || node.dataset.label === view.label ? "" : "none";
  }
  for (const row of $("box-table").querySelectorAll("tbody tr[data-box]")) {
    row.classList.toggle("dim", !all && row.dataset.label !== view.label);
  }
  const truth = $("truth-toggle").checked;
  for (const node of $("box-layer").querySelectorAll("[data-truth]")) {
    node.style.display = truth ? "" : "none";
  }
  layoutCaptions();
}

function setupPredict() {
  $("predict-file").addEventListener("change", (event) => predictFile(event.target.files[0]));
  $("heatmap-label").addEventListener("change", (event) => selectLabel(event.target.value));
  for (const id of ["heatmap-toggle", "heatmap-opacity", "boxes-toggle", "boxes-scope",
    "truth-toggle"]) {
    $(id).addEventListener("input", applyOverlayStyle);
  }
  window.addEventListener("resize", () => {
    fitStage();
    if (view.prediction) drawBoxes();
  });
  let sample = 0;
  $("demo-sample").addEventListener("click", async () => {
    // Demo only: a generated phantom (truth in a header), predicted like an uploaded file.
    sample += 1;
    try {
      const [response, answer] = await Promise.all([
        fetch(`/demo/phantom.png?seed=${sample}`), fetch(`/demo/phantom.json?seed=${sample}`)]);
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      if (!answer.ok) throw new Error(`HTTP ${answer.status}`);
      const truth = await answer.json();
      await predictFile(new File([await response.blob()], `phantom-${sample}.png`,
        { type: "image/png" }), truth);
      setStatus("predict-status", `${$("predict-status").textContent} (phantom drawn with: ` +
        `${truth.labels.join(", ") || "none"}; true boxes dashed)`);
    } catch (error) {
      setStatus("predict-status", `phantom: ${error.message}`, true);
    }
  });
  const viewer = $("viewer");
  viewer.addEventListener("dragover", (event) => {
    event.preventDefault();
    viewer.classList.add("dragging");
  });
  viewer.addEventListener("dragleave", () => viewer.classList.remove("dragging"));
  viewer.addEventListener("drop", (event) => {
    event.preventDefault();
    viewer.classList.remove("dragging");
    const file = event.dataTransfer && event.dataTransfer.files[0];
    if (file) predictFile(file);
  });
  if (!CONFIG.model) {
    setStatus("predict-status", "No image model loaded: start with `cxr serve --demo` " +
      "or `--model FILE`.", true);
  }
  if (CONFIG.demoNotice) document.body.classList.add("has-demo");
}

// --- Report ----------------------------------------------------------------------------

async function labelReport() {
  const text = $("report-text").value;
  if (!text.trim()) {
    setStatus("report-status", "Type or paste a report first.", true);
    return;
  }
  setStatus("report-status", "Labeling…");
  try {
    const result = await apiJson("/v1/reports/label", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ text }),
    });
    showReport(text, result);
    setStatus("report-status", `${result.mentions.length} mention(s); labeler ` +
      result.labeler_version);
  } catch (error) {
    setStatus("report-status", error.message, true);
  }
}

function describeAttributes(attrs) {
  if (!attrs || typeof attrs !== "object") return "";
  return Object.entries(attrs)
    .filter(([, v]) => v !== null && v !== undefined && v !== "" &&
      !(Array.isArray(v) && !v.length))
    .map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(", ") : typeof v === "object" ?
      JSON.stringify(v) : v}`).join("; ");
}

function mentionTitle(m) {
  const attrs = describeAttributes(m.attributes);
  return [`${m.label}: ${m.status}`, `rule: ${m.rule || "(none)"}`,
    m.cue && `cue: ${m.cue}`, `section: ${m.section || "(none)"}`,
    `NegEx: ${m.negex || "(none)"}`,
    attrs && `attributes: ${attrs}`].filter(Boolean).join("\n");
}

function renderHighlighted(box, text, mentions, focus) {
  // The one renderer of a report's evidence: the Report view and a worklist row opened.
  // Offsets index the text as sent; overlapping mentions keep the first one. Mentions of
  // `focus` (a row's finding) are marked "focus"; the others stay highlighted beside them.
  box.replaceChildren();
  const sorted = [...mentions].sort((a, b) => a.start - b.start || b.end - a.end);
  let at = 0;
  for (const m of sorted) {
    if (m.start < at || m.end > text.length || m.end <= m.start) continue;
    box.append(text.slice(at, m.start));
    const cls = `mention ${m.status}` + (focus && m.label === focus ? " focus" : "");
    box.append(el("mark", { class: cls, title: mentionTitle(m),
      "data-label": m.label, "data-rule": m.rule || "", "data-section": m.section || "",
      "data-negex": m.negex || "" }, text.slice(m.start, m.end)));
    at = m.end;
  }
  box.append(text.slice(at));
  return sorted;
}

function showReport(text, result) {
  const mentions = renderHighlighted($("report-highlighted"), text, result.mentions, null);

  const labels = $("report-labels").querySelector("tbody");
  labels.replaceChildren();
  const order = { positive: 0, uncertain: 1, negative: 2, absent: 3 };
  const entries = Object.entries(result.labels)
    .sort((a, b) => (order[a[1]] ?? 4) - (order[b[1]] ?? 4) || a[0].localeCompare(b[0]));
  const findings = result.findings || {};
  for (const [label, status] of entries) {
    const finding = Object.assign({}, findings[label] || {});
    delete finding.status;
    labels.append(el("tr", { class: status }, el("td", { text: label }),
      el("td", { class: status, text: status }),
      el("td", { class: "attrs", text: describeAttributes(finding) })));
  }
  labels.append(el("tr", {}, el("td", { text: "No Finding" }),
    el("td", { class: result.no_finding ? "positive" : "absent",
      text: result.no_finding ? "yes" : "no" }), el("td", {})));
  $("report-labels").hidden = false;

  const rows = $("report-findings").querySelector("tbody");
  rows.replaceChildren();
  for (const m of mentions) {
    rows.append(el("tr", {}, el("td", { text: m.label }),
      el("td", { class: m.status, text: m.status }), el("td", { text: m.text }),
      el("td", { text: m.section || "" }), el("td", { text: m.rule || "" }),
      el("td", { text: m.negex || "" }),
      el("td", { class: "attrs", text: describeAttributes(m.attributes) })));
  }
  $("report-findings").hidden = !mentions.length;
}

function setupReport() {
  $("report-label").addEventListener("click", labelReport);
  $("report-text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) labelReport();
  });
}

// --- Batches ---------------------------------------------------------------------------

const batches = { timer: null, selected: null, lines: [], loadedAt: 0, states: new Map() };
const MAX_ROWS = 1000; // more rows are in the downloads

function fmtTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

async function refreshJobs() {
  clearTimeout(batches.timer);
  if (needKey()) return;
  let jobs;
  try {
    jobs = await apiJson("/v1/batches?limit=50");
  } catch (error) {
    setStatus("batch-status", error.message, true);
    return;
  }
  renderJobs(jobs);
  // Jobs seen queued or running that have ended since: the worklist reloads (worklist.js).
  const active = (state) => state === "queued" || state === "running";
  const finished = jobs.filter((j) => active(batches.states.get(j.id)) && !active(j.state));
  for (const j of jobs) batches.states.set(j.id, j.state);
  document.dispatchEvent(new CustomEvent("cxr:jobs", { detail: { jobs, finished } }));
  const running = jobs.some((j) => j.state === "queued" || j.state === "running");
  const selected = jobs.find((j) => j.id === batches.selected);
  if (selected && selected.state !== "queued") {
    // Results grow while the job runs; reload them while it does (and once when done).
    const count = selected.done + selected.skipped + selected.failed;
    const changed = batches.loadedState !== selected.state || batches.loadedCount !== count;
    // While a job runs, its results are reloaded at most every 5 s (they can be long).
    if (changed && (selected.state !== "running" || Date.now() - batches.loadedAt > 5000)) {
      loadResults(selected);
    }
  }
  if (running) batches.timer = setTimeout(refreshJobs, 1000);
}

function renderJobs(jobs) {
  const tbody = $("jobs-table").querySelector("tbody");
  tbody.replaceChildren();
  if (!jobs.length) {
    tbody.append(el("tr", { class: "none" }, el("td", { colspan: 6, text: "No batch jobs yet." })));
    return;
  }
  for (const job of jobs) {
    const progress = el("progress", { max: 1, value: job.progress });
    const pct = `${Math.round(job.progress * 100)}%`;
    const jsonl = el("button", { type: "button", class: "dl", "data-format": "jsonl",
      text: "JSONL" });
    const csv = el("button", { type: "button", class: "dl", "data-format": "csv", text: "CSV" });
    const show = el("button", { type: "button", class: "show", text: "Show" });
    jsonl.addEventListener("click", (e) => { e.stopPropagation(); download(job, "jsonl"); });
    csv.addEventListener("click", (e) => { e.stopPropagation(); download(job, "csv"); });
    show.addEventListener("click", (e) => { e.stopPropagation(); selectJob(job); });
    const row = el("tr", { "data-job": job.id, "data-state": job.state,
      class: job.id === batches.selected ? "selected" : "" },
      el("td", { text: fmtTime(job.created_at), title: job.id }),
      el("td", {}, el("span", { class: `state-${job.state}`, text: job.state }),
        job.error ? el("div", { class: "hint", text: job.error }) : ""),
      el("td", {}, progress, ` ${pct}`),
      el("td", { class: "num",
        text: `${job.done} / ${job.skipped} / ${job.failed} / ${job.pending}` }),
      el("td", { text: (job.model || "none") + (job.demo ? " (DEMO)" : "") }),
      el("td", {}, show, " ", jsonl, " ", csv));
    row.addEventListener("click", () => selectJob(job));
    tbody.append(row);
  }
}

async function download(job, format) {
  try {
    const url = await apiObjectUrl(job.results[format]);
    const a = el("a", { href: url, download: `batch-${job.id}.${format}` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (error) {
    setStatus("batch-status", `download: ${error.message}`, true);
  }
}

function selectJob(job) {
  batches.selected = job.id;
  for (const row of $("jobs-table").querySelectorAll("tbody tr")) {
    row.classList.toggle("selected", row.dataset.job === job.id);
  }
  loadResults(job);
}

async function loadResults(job) {
  let text;
  try {
    text = await (await api(job.results.jsonl)).text();
  } catch (error) {
    setStatus("batch-status", `results: ${error.message}`, true);
    return;
  }
  if (batches.selected !== job.id) return;
  batches.lines = text.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
  batches.loadedState = job.state;
  batches.loadedCount = job.done + job.skipped + job.failed;
  batches.loadedAt = Date.now();
  $("batch-results").hidden = false;
  $("batch-results-title").textContent = `Results of the job of ${fmtTime(job.created_at)} ` +
    `(${job.state})`;
  const labels = new Set();
  for (const line of batches.lines) {
    for (const l of (line.prediction && line.prediction.positive) || []) labels.add(l);
    for (const l of (line.report && line.report.positive) || []) labels.add(l);
  }
  const select = $("filter-label");
  const current = select.value;
  select.replaceChildren(el("option", { value: "", text: "any" }));
  for (const l of [...labels].sort()) select.append(el("option", { value: l, text: l }));
  select.value = labels.has(current) ? current : "";
  renderResults();
}

function renderResults() {
  const label = $("filter-label").value;
  const errorsOnly = $("filter-errors").checked;
  const tbody = $("result-table").querySelector("tbody");
  tbody.replaceChildren();
  let shown = 0;
  for (const line of batches.lines) {
    const modelPos = (line.prediction && line.prediction.positive) || [];
    const reportPos = (line.report && line.report.positive) || [];
    const error = line.error || (line.report && line.report.error) || "";
    if (errorsOnly && !error && line.state !== "failed") continue;
    if (label && !modelPos.includes(label) && !reportPos.includes(label)) continue;
    shown += 1;
    if (shown > MAX_ROWS) continue;
    // A report that matched and found nothing is not the same as no report at all; a row
    // that never got as far as a report lookup (a skipped file) says neither.
    const uncertain = Object.entries((line.report && line.report.labels) || {})
      .filter(([, v]) => v === "uncertain").map(([k]) => k);
    const report = !("report" in line) ? { kind: "unread", text: "" } :
      !line.report ? { kind: "none", text: "no report matched" } :
      line.report.error ? { kind: "error", text: "report not labeled" } :
      reportPos.length ? { kind: "positive", text: reportPos.join(", ") } :
      { kind: "negative", text: "report: none positive" +
        (uncertain.length ? ` (uncertain: ${uncertain.join(", ")})` : "") };
    tbody.append(el("tr", { "data-state": line.state },
      el("td", { text: line.path, title: line.path }), el("td", { text: line.state }),
      el("td", { text: line.kind || "" }), el("td", { text: modelPos.join(", ") }),
      el("td", { class: `report-${report.kind}`, "data-report": report.kind,
        text: report.text }),
      el("td", { class: error ? "err" : "", text: error || line.reason || "" })));
  }
  $("filter-count").textContent = `${shown} of ${batches.lines.length} files` +
    (shown > MAX_ROWS ? ` (the first ${MAX_ROWS} shown; download for all)` : "");
}

async function startBatch(event) {
  event.preventDefault();
  const zip = $("batch-zip").files[0];
  if (!zip) {
    setStatus("batch-status", "Choose the export as a zip file.", true);
    return;
  }
  const form = new FormData();
  form.append("file", zip, zip.name);
  const reports = $("batch-reports").files[0];
  if (reports) form.append("reports", reports, reports.name);
  setStatus("batch-status", `Uploading ${zip.name}…`);
  try {
    const job = await apiJson("/v1/batches", { method: "POST", body: form });
    batches.states.set(job.id, job.state);
    setStatus("batch-status", `Job started (${job.id.slice(0, 8)}).`);
    batches.selected = job.id;
    $("batch-form").reset();
    refreshJobs();
  } catch (error) {
    setStatus("batch-status", error.message, true);
  }
}

async function startPathBatch(event) {
  event.preventDefault();
  const body = { path: $("batch-path").value.trim() };
  const reports = $("batch-path-reports").value.trim();
  if (reports) body.reports = reports;
  try {
    const job = await apiJson("/v1/batches", { method: "POST",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    batches.states.set(job.id, job.state);
    setStatus("batch-status", `Job started (${job.id.slice(0, 8)}).`);
    batches.selected = job.id;
    refreshJobs();
  } catch (error) {
    setStatus("batch-status", error.message, true);
  }
}

function setupBatches() {
  $("batch-form").addEventListener("submit", startBatch);
  $("batch-path-form").hidden = !CONFIG.batchRoots;
  $("batch-path-form").addEventListener("submit", startPathBatch);
  $("filter-label").addEventListener("change", renderResults);
  $("filter-errors").addEventListener("change", renderResults);
  refreshJobs();
}

setupKeyBar();
setupPredict();
setupReport();
setupBatches();
