"""The service: FastAPI app, `cxr` command line, batch engine, PACS integration and web page."""
