"""Weakly-supervised chest X-ray classifier (ChestX-ray8/14, Wang et al. 2017).

Import from the submodules; nothing heavy is imported here (no torch at `import models`):

    from models.images import load_image          # DICOM/PNG/JPEG -> grey float [0, 1]
    from models.predict import load_predictor      # checkpoint -> Predictor
    from models.train import TrainConfig, train    # training loop
    from models.evaluate import evaluate_checkpoint
"""

__all__: list[str] = []
