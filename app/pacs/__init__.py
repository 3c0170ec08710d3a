"""PACS integration: DICOM results (TID 1500 SR, GSPS), a DICOMweb client, a C-STORE listener.

Submodules import highdicom, pydicom, pynetdicom and httpx; nothing is imported here, so
`import app.pacs` stays cheap.
"""
