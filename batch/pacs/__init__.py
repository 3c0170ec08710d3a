"""What a batch job needs of a PACS: a DICOMweb client, TID 1500 SR and GSPS writers.

Submodules import highdicom, pydicom and httpx; nothing is imported here, so
`import batch.pacs` stays cheap.
"""
