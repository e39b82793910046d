"""The linear learners on a Dask cluster: features partitioned by query, products where they live.

* :mod:`.collection`: :meth:`RankingDataset.from_dask` partitions a feature table by query
  (:class:`DistributedDataset`); ``aggregate_clicks(log, data, engine="dask")`` reduces a log per
  partition (:class:`DistributedAggregate`), with its IPS/SNIPS estimates.
* :mod:`.newton`: the Hessian-free Newton path of the pairwise hinge over partitions: every
  product with the features is a task on the partition's worker, and only ``d``-vectors and
  scalars travel.
* :mod:`.fit`: ``RankSVM``, ``SVMPropRank`` and ``SVMPropDCG`` fitted on those objects (their
  ``fit`` hands a distributed input here).
"""

from .collection import DistributedAggregate, DistributedDataset, Partition

__all__ = ["DistributedAggregate", "DistributedDataset", "Partition"]


def __getattr__(name):
    """``distributed.newton`` and ``distributed.fit`` moved to the solvers and estimators: see :mod:`.._moved`."""
    from .._moved import moved_attribute
    return moved_attribute(__name__, name)
