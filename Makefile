# make demo: set up .venv if missing, make the synthetic data if missing, then
# train and evaluate the quickstart experiment (its exporters write the
# SavedModel of the final checkpoint to export/latest/), and draw that
# model's predictions on 4 validation images. make test: the test suite.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
DATA := data/synthetic
MODEL_DIR ?= runs/quickstart
VIS := $(MODEL_DIR)/visualizations

.PHONY: demo test clean

$(BIN)/train_and_eval: requirements.lock setup.py pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip==24.3.1
	$(BIN)/python -m pip install --quiet --no-deps -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

$(DATA)/val-00000-of-00004.tfrecord: | $(BIN)/train_and_eval
	$(BIN)/make_synthetic_dataset --output_dir=$(DATA)

demo: $(BIN)/train_and_eval $(DATA)/val-00000-of-00004.tfrecord
	rm -rf $(MODEL_DIR)
	$(BIN)/train_and_eval --gin_file=gin/experiments/quickstart.gin \
	  --model_dir=$(MODEL_DIR)
	$(BIN)/write_examples \
	  --input=$(DATA)/val-00000-of-00004.tfrecord --output_dir=$(VIS)/inputs \
	  --count=4
	$(BIN)/predict_images --model_dir=$(MODEL_DIR) \
	  --input=$(VIS)/inputs/images --label_dir=$(VIS)/inputs/labels \
	  --output_dir=$(VIS)

# --durations: every run's log names the slowest tests, which the suite's
# 25-minute budget on 2 cores is spent on.
test: $(BIN)/train_and_eval
	$(BIN)/python -m pytest -n 2 --dist=loadfile -q --durations=30 tests

clean:
	rm -rf $(VENV) data runs
