"""Mesh shapes for @pytest.mark.bench_mesh."""

import pytest

from pytest_tesserabench.distributed.mesh import MeshError, factorizations, mesh_parameters, resolve


def test_factorizations_cover_every_layout():
    assert factorizations(4, 2) == [(1, 4), (2, 2), (4, 1)]
    assert factorizations(1, 2) == [(1, 1)]
    assert len(factorizations(8, 3)) == 10
    assert all(a * b * c == 8 for a, b, c in factorizations(8, 3))


def test_marker_with_names_gives_every_layout_of_the_world():
    values, ids = mesh_parameters(("dp", "tp"), {}, "t", world_size=4)
    assert values == ["dp=1,tp=4", "dp=2,tp=2", "dp=4,tp=1"]
    assert ids == ["mesh=dp1xtp4", "mesh=dp2xtp2", "mesh=dp4xtp1"]


def test_marker_with_sizes_gives_one_shape():
    assert mesh_parameters((), {"dp": 2, "tp": -1}, "t", world_size=8) == (["dp=2,tp=-1"], ["mesh=dp2xtp*"])


def test_resolve_fills_in_the_rest_or_says_what_is_needed():
    assert resolve("dp=2,tp=-1", 8) == (("dp", "tp"), (2, 4))
    with pytest.raises(MeshError, match="needs 4") as info:
        resolve("dp=2,tp=2", 2)
    assert info.value.needed == 4
    with pytest.raises(MeshError, match="does not fit 4"):
        resolve("dp=3,tp=-1", 4)


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        ((), {}, "not both, not neither"),
        (("dp",), {"tp": 2}, "not both"),
        (("dp", "dp"), {}, "distinct identifiers"),
        (("d p",), {}, "distinct identifiers"),
        ((), {"dp": 0}, "positive whole numbers or -1"),
        ((), {"dp": -1, "tp": -1}, "at most one dimension may be -1"),
    ],
)
def test_bad_markers_say_how_to_write_them(args, kwargs, message):
    with pytest.raises(MeshError, match=message):
        mesh_parameters(args, kwargs, "test_x", world_size=4)
