"""The web page at `/`: one server-rendered template plus local JavaScript and CSS.

No asset comes from elsewhere (a hospital network has no CDN): the Content-Security-Policy
allows this origin only. The page itself needs no API key; it calls the /v1 JSON API
with the key the user enters, kept in sessionStorage.
"""

from __future__ import annotations

import html
import json
from functools import lru_cache
from pathlib import Path
from string import Template
from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import HTMLResponse

from app.deps import AppState, StateDep
from app.errors import NotFound, shown
from app.schemas import DEMO_NOTICE
from models.overlay import PALETTE

router = APIRouter(include_in_schema=False)

WEB_DIR = Path(__file__).resolve().parents[1] / "web"
_STATIC_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
# Same origin only; blob: for images fetched with the API key; no inline script.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
    "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)


@lru_cache(maxsize=1)
def _template() -> Template:
    return Template((WEB_DIR / "templates" / "index.html").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _static_files() -> dict[str, Path]:
    # An allowlist of the shipped files: a request can only name one of these.
    folder = WEB_DIR / "static"
    return {p.name: p for p in folder.iterdir() if p.suffix in _STATIC_TYPES and p.is_file()}


@router.get("/", response_class=HTMLResponse)
def index(state: StateDep) -> HTMLResponse:
    """The page: Predict, Report, Batches, and the API key prompt."""
    card = state.predictor.card if state.predictor is not None else None
    demo = bool(card and card.get("demo"))
    config = {
        "apiKeyRequired": state.api_keys.enabled,
        "model": (
            {k: card.get(k) for k in ("name", "version", "demo", "labels")} if card else None
        ),
        "demoNotice": DEMO_NOTICE if demo else None,
        "batchRoots": bool(state.settings.batch_roots),
        "palette": list(PALETTE),  # the overlay PNGs' box colours: one palette
    }
    if card is None:
        model_line = "No image model loaded: image prediction is unavailable."
    else:
        model_line = f"Model {card.get('name')} {card.get('version')}"
    page = _template().substitute(
        config=html.escape(json.dumps(config), quote=True),
        model_line=html.escape(model_line),
        demo_hidden="" if demo else "hidden",
        demo_notice=html.escape(DEMO_NOTICE),
        predict_disabled="" if card is not None else "disabled",
    )
    return HTMLResponse(
        page,
        headers={
            "Content-Security-Policy": CSP,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-store",
        },
    )


# The page asks for seeds 1, 2, 3, ...; they wrap at this many, each rendered once (0.2-0.5 s)
# and kept (about 0.17 MB each, 5.4 MB in all), so the endpoint, open without a key, costs no
# CPU after the first round however often it is called (issue 18 item 17).
PHANTOM_SEEDS = 32


@lru_cache(maxsize=PHANTOM_SEEDS)
def _phantom_png(seed: int) -> tuple[bytes, dict[str, Any]]:
    import cv2

    from models.demo import example_phantom

    phantom = example_phantom(seed)
    ok, png = cv2.imencode(".png", phantom.image)
    if not ok:  # pragma: no cover - encoding a uint8 array does not fail
        raise RuntimeError("PNG encoding failed")
    rows, columns = phantom.image.shape
    truth = {
        "seed": seed,
        "rows": rows,
        "columns": columns,
        "labels": phantom.labels,
        # The generator's own boxes (pixels of this image): what the model should find.
        "boxes": [
            {"label": label, "x": x, "y": y, "width": w, "height": h}
            for label, x, y, w, h in phantom.boxes
        ],
    }
    return png.tobytes(), truth


def _demo_only(state: AppState) -> None:
    card = state.predictor.card if state.predictor is not None else None
    if not (card and card.get("demo")):
        raise NotFound("sample phantoms are offered only with the demo model (cxr serve --demo)")


@router.get("/demo/phantom.png")
def demo_phantom(state: StateDep, seed: int = 0) -> Response:
    """A synthetic chest phantom to try the demo model with (only while a demo model is
    loaded: it is no radiograph, and a real model must never be shown one as a sample).
    `seed` is taken modulo PHANTOM_SEEDS: the same few images, rendered once."""
    _demo_only(state)
    png, truth = _phantom_png(seed % PHANTOM_SEEDS)
    return Response(
        png, media_type="image/png", headers={"X-CXR-Phantom-Labels": ",".join(truth["labels"])}
    )


@router.get("/demo/phantom.json")
def demo_phantom_truth(state: StateDep, seed: int = 0) -> dict[str, Any]:
    """The truth of `/demo/phantom.png?seed=N`: its lesion labels and their true boxes, from
    the phantom generator, in the image's pixels (the page draws them dashed)."""
    _demo_only(state)
    return _phantom_png(seed % PHANTOM_SEEDS)[1]


@router.get("/static/{name}")
def static_file(name: str) -> Response:
    """One of the page's own assets (JavaScript, CSS, icon)."""
    path = _static_files().get(name)
    if path is None:
        raise NotFound(f"no static file {shown(name)}")
    return Response(
        path.read_bytes(),
        media_type=_STATIC_TYPES[path.suffix],
        headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
    )
