"""official_seg: DeepLab-class semantic segmentation on the Estimator API."""
