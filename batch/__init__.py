"""The batch library: label reports and predict images over a whole PACS export.

A plain library beside `labeler/` and `models/` (no web stack, no database, no settings,
so a Ray worker imports it alone). One engine serves `cxr batch` (results streamed to a
JSONL file), `POST /v1/batches` (results stored per item by `app.jobs`, so a job survives
restarts) and `cxr listen`; `job.build_job` turns a typed `JobSpec` into the source, the
processor and the library's sinks for all three:

    source ──scan──▶ items ──plan (resume)──▶ processor ──chunks of outcomes──▶ sinks

- **Sources** (`interfaces.Source`) find the items and give each a stable `key` (the
  result line's `path`): `sources.FolderSource` (an export folder, key = relative path),
  `sources.ZipSource` (an uploaded zip, checked by `archive` and extracted first),
  `dicomweb_source.DicomwebSource` (QIDO/WADO-RS) and `inbox_source` (what `cxr listen`
  receives by C-STORE).
  A source implements `scan()` (every item, classified from headers only, typically with
  `scan.classify_file(local_file, key)`, in a stable order) and `local_path(item)` (a
  local file with the item's bytes: a DICOMweb source downloads it there; `release(item)`
  drops it after processing). A C-STORE inbox is a folder the listener writes into,
  keyed by SOP Instance UID.
- **The processor** (`processor.BatchProcessor`) turns a chunk of items into `Outcome`s:
  done, skipped or failed with the reason, whatever the decoder raises; images are
  predicted in one forward pass per chunk and get their study's report labels (reports
  CSV via `reports.load_reports_csv`, or an SR of the same study, processed first).
- **Sinks** (`interfaces.Sink`) receive each chunk's outcomes in order: `sinks.JsonlSink`
  (the CLI's output), `app.jobs.DatabaseSink` (a service job's items), `sinks.DatasetSink`
  (an NIH-style training set; it adds `dataset_image`, so it goes before the JSONL sink),
  `sinks.TallySink` (counts, rejects), `dicom_push.DicomPushSink` (SR + GSPS by STOW-RS,
  from `outcome.result` and `outcome.image`, the decoded image, available while the
  chunk's sinks run).
- **The engine** (`engine.plan`, `engine.run_resumed`): `plan` is the one resume path
  (items already recorded, as result lines, are left out and what they taught the
  processor is restored); `run_resumed` retries alone the items in flight when a process
  died and gives up those in flight twice, then processes chunk by chunk and can be
  stopped between files. Reading one file is bounded by `limits.call_with_limit`.
- **The runner** (`app.jobs.BatchRunner`) is the service's background thread: it stores a
  job's scan, runs the engine with the database as sink, resumes unfinished jobs at
  start-up, and cancels a job on DELETE.

The result-line format is in `results`. Only the contracts are imported here, so that
`app.crud` can use `SourceItem` without importing the engine.
"""

from batch.interfaces import BatchInputError, Outcome, Sink, Source, SourceItem

__all__ = ["BatchInputError", "Outcome", "Sink", "Source", "SourceItem"]
