"""PACS integration of the service: the C-STORE listener (`cxr listen`) and its guard.

The DICOMweb client and the SR/GSPS writers are the batch library's (`batch.pacs`).
Submodules import pydicom and pynetdicom; nothing is imported here, so `import app.pacs`
stays cheap.
"""
