"""Click logs: what was shown and clicked, checked on the way in, and the aggregate the learners fit on.

The second step of the flow (``docs/architecture.md``). It owns:

* :mod:`.clicklog`: :class:`ClickLog`, sessions that refer to data-set rows, or to the (query,
  document) rows of its own id table when loaded raw (``ClickLog.from_events``; ``with_data``
  joins features by id);
* :mod:`.raw_events`, :mod:`.session_checks`: raw events to a log's arrays, pages cut from rows,
  the checks every path into a log shares;
* :mod:`.impression_features`: a feature table from a raw log's impressions, for logs without features;
* :mod:`.files`, :mod:`.log_integrity`: Parquet/CSV log files with checksums and a content
  digest, verified on read;
* :mod:`.aggregate`: :class:`ClickAggregate`, the learners' sufficient statistic (summed IPS
  weights per (query, document)), in memory, streamed (``_log_stream``, ``_raw_stream``,
  ``_count_table``) or on Dask.

The aggregate lives here, with the log it summarises: it needs the examination models below
(:mod:`counterfactual_ltr.examination`) and nothing above; propensity *estimation* reads logs and
so sits above, in :mod:`counterfactual_ltr.propensity`.
"""

from .aggregate import ClickAggregate, aggregate_clicks
from .clicklog import ClickLog
from .files import read_click_log, write_click_log
from .impression_features import impression_features

__all__ = ["ClickLog", "ClickAggregate", "aggregate_clicks", "read_click_log", "write_click_log",
           "impression_features"]
