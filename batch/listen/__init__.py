"""`cxr listen`: a C-STORE listener that runs every received image through the batch engine.

The association guard bounds what a network peer can make it hold; the Orthanc Lua hook in
`orthanc/` forwards new chest radiographs to it. Submodules import pydicom and pynetdicom;
nothing is imported here, so `import batch.listen` stays cheap.
"""
