"""torch._dynamo.utils of the stand-in: the counters the glue reads to tell a compiled job
(counters["stats"]["unique_graphs"]: none made, the stand-in compiles nothing)."""
import collections

counters = collections.defaultdict(collections.Counter)
