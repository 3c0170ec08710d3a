# cxr service image: `cxr serve` on 0.0.0.0:8000, as a non-root user.
#
#   docker build -t cxr .
#   docker run -p 8000:8000 -e CXR_API_KEYS=sha256:... \
#     -v cxr-data:/data -v /path/to/checkpoints:/models:ro -e CXR_MODEL=/models/model.pt cxr
#
# The model and the data are volumes, never baked in. API keys are required: the
# service refuses to listen on a public address without them (make one with
# `docker run --rm cxr cxr apikey`). For a CUDA build, pass
# --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128 (and run with --gpus all).
FROM python:3.11-slim

ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /opt/cxr

# Dependencies first (cached layer), from the pinned list in pyproject.toml.
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install --extra-index-url "$TORCH_INDEX" -r /tmp/requirements.txt

COPY app ./app
COPY batch ./batch
COPY labeler ./labeler
COPY models ./models
COPY migrations ./migrations
RUN pip install --no-deps . \
    && useradd --system --uid 10001 --user-group --home-dir /home/cxr --create-home cxr \
    && mkdir -p /data /models \
    && chown cxr:cxr /data

USER cxr

# Storage (SQLite by default, heatmaps, batch jobs) lives in the /data volume;
# set CXR_DATABASE_URL for PostgreSQL (see docker-compose.yml).
ENV CXR_STORAGE_DIR=/data \
    CXR_HOST=0.0.0.0 \
    CXR_PORT=8000
VOLUME ["/data"]
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=90s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=4)"]

CMD ["cxr", "serve", "--host", "0.0.0.0", "--port", "8000"]
