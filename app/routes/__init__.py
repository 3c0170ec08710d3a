"""One router per resource: reports, images, predictions, batches, studies, discrepancies."""
