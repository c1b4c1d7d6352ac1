"""What start-up made and the process keeps (the modules, the first list of every Node) is
put out of the cyclic garbage collector's sight once the Nodes are listed, and the young
generation is collected less often: at 5,000 nodes, full collections walking all of it
stopped the event loop for 150-200 ms every few seconds while nodes failed (section 4n of
bench/RESULTS.md)."""

from __future__ import annotations

from phased.core.settings import Settings
from phased.handlers import YOUNG_THRESHOLD
from tests.handlers.startup import Collector, started


def test_the_first_node_list_is_out_of_the_collectors_sight_after_start_up() -> None:
    collector = Collector()
    started(Settings(), collector=collector)
    assert not collector.listed_in_sight


def test_the_young_generation_is_collected_after_more_allocations_than_cpythons_default() -> None:
    collector = Collector()
    started(Settings(), collector=collector)
    assert collector.young_threshold == YOUNG_THRESHOLD > 700
