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
# one float32 matrix of raw features, ``features`` (one row per document), and returns ``score``,
# one per row.
onnx_bytes = export_model(model, "onnx")
session = ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
exported = session.run(["score"], {"features": test.X.astype(np.float32)})[0]
expected = model.predict(test.X)

# %%
# The scores agree to float32 precision
# -------------------------------------
# As in the serving guide, a difference is relative to the score, or to a thousandth of the
# largest score for the scores near zero. The exported graph computes in float64 but takes its
# features as float32 (what ONNX serving passes): on the same float32-rounded features it gives
# ``model.predict``'s scores to float32 precision, and against the float64 features the
# difference is that input rounding, far below anything that would change a ranking.
scale = np.maximum(np.abs(expected), 1e-3 * np.abs(expected).max())
same_input = model.predict(test.X.astype(np.float32).astype(np.float64))
print(f"largest relative difference, same float32 features: {np.max(np.abs(exported - same_input) / scale):.1e}")
print(f"largest relative difference, float64 features:      {np.max(np.abs(exported - expected) / scale):.1e}")

# %%
# Where the features are doubles, ``onnx_dtype="float64"`` (``cltr export --onnx-dtype float64``)
# gives a model whose input and output are float64: it equals ``model.predict`` to double rounding.
session64 = ort.InferenceSession(export_model(model, "onnx", onnx_dtype="float64"),
                                 providers=["CPUExecutionProvider"])
exported64 = session64.run(["score"], {"features": test.X})[0]
print(f"largest relative difference, float64 model:         {np.max(np.abs(exported64 - expected) / scale):.1e}")

fig, ax = plt.subplots(figsize=(4.5, 4.5))
ax.scatter(expected, exported, s=6, alpha=0.5)
lims = [min(expected.min(), exported.min()), max(expected.max(), exported.max())]
ax.plot(lims, lims, color="gray", linestyle="--", linewidth=1, label="equal scores")
ax.set_xlabel("model.predict (float64)")
ax.set_ylabel("ONNX Runtime (float32)")
ax.legend()
fig.tight_layout()
