"""
Serving the ranker: export to ONNX and check the scores
=======================================================

A ranker earns its keep where the queries are served. :func:`counterfactual_ltr.export.export_model`
writes a fitted ranker in a serving stack's own format (Solr, the OpenSearch/Elasticsearch LTR
plugin, Vespa, ONNX); the exported model scores RAW features, because the model's preprocessing is
folded into it. Here we fit SVM PropDCG with a ``StandardScaler`` on a simulated click log, export
it to ONNX, score a batch with ONNX Runtime (a reader that shares no code with the toolkit) and
check that its scores are the ones ``model.predict`` gives.
"""

# %%
# Fit a ranker on a click log
# ---------------------------
# The scaler is part of the model: the export must reproduce it, not assume scaled input.
import matplotlib.pyplot as plt
import numpy as np
import onnxruntime as ort
from sklearn.preprocessing import StandardScaler

from click_sim import (PositionBasedClickModel, make_ranking, simulate_clicks,
                       train_production_ranker)
from counterfactual_ltr import SVMPropDCG
from counterfactual_ltr.export import export_model

data = make_ranking(n_queries=300, random_state=0)
train, test = data.subset(np.arange(200)), data.subset(np.arange(200, 300))
production = train_production_ranker(train, fraction=0.01, random_state=0)
clicks = PositionBasedClickModel(eta=1.0, eps_minus=0.1, eps_plus=1.0)
log = simulate_clicks(train, production, clicks, n_passes=5, random_state=0)
model = SVMPropDCG(C=1, propensity=clicks.eta, preprocessor=StandardScaler()).fit(log)
print(f"test NDCG@10 {model.score(test):.3f}")

# %%
# Export to ONNX and score with ONNX Runtime
# ------------------------------------------
# ``export_model(model, "onnx")`` gives the ONNX model's bytes (``write_export`` or
# ``cltr export model.npz --format onnx -o ranker.onnx`` writes them to a file). The graph takes
# one float32 matrix of raw features, one row per document, and returns one score per row.
onnx_bytes = export_model(model, "onnx")
session = ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
name = session.get_inputs()[0].name
exported = session.run(None, {name: test.X.astype(np.float32)})[0].ravel()
expected = model.predict(test.X)

# %%
# The scores agree to float32 precision
# -------------------------------------
# ONNX Runtime computes in float32, the toolkit in float64: the difference is rounding, far
# below anything that would change a ranking.
scale = np.maximum(np.abs(expected), np.abs(expected).max() * 1e-6)
print(f"largest relative difference: {np.max(np.abs(exported - expected) / scale):.2e}")

fig, ax = plt.subplots(figsize=(4.5, 4.5))
ax.scatter(expected, exported, s=6, alpha=0.5)
lims = [min(expected.min(), exported.min()), max(expected.max(), exported.max())]
ax.plot(lims, lims, color="gray", linestyle="--", linewidth=1, label="equal scores")
ax.set_xlabel("model.predict (float64)")
ax.set_ylabel("ONNX Runtime (float32)")
ax.legend()
fig.tight_layout()
