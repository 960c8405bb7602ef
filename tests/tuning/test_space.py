"""The declared config space: enumeration, constraints, and every kind of bad space."""

import pytest

from pytest_tesserabench.tuning.space import Config, ConfigSpace, SpaceError


def test_enumerates_the_product_that_satisfies_every_constraint():
    space = ConfigSpace(
        params={"BLOCK_M": [32, 64, 128], "BLOCK_N": [32, 64], "num_warps": [4, 8]},
        constraints=["BLOCK_M % BLOCK_N == 0", "BLOCK_M * BLOCK_N <= 32 * 32 * num_warps"],
    )
    enumeration = space.enumerate()
    assert enumeration.size == 12 == space.size
    expected = {
        Config({"BLOCK_M": m, "BLOCK_N": n, "num_warps": w})
        for m in (32, 64, 128)
        for n in (32, 64)
        for w in (4, 8)
        if m % n == 0 and m * n <= 1024 * w
    }
    assert set(enumeration.legal) == expected
    # Each rejected config is counted once, under the first constraint it breaks.
    assert sum(enumeration.rejected_by.values()) == 12 - len(expected)
    assert enumeration.rejected_by["BLOCK_M % BLOCK_N == 0"] == 2  # 32 % 64, for both warp counts


def test_constraints_see_problem_and_target_values():
    space = ConfigSpace(
        params={"BLOCK_K": [32, 64, 128]}, constraints=["BLOCK_K * itemsize <= shared_per_block // 512"]
    )
    legal = space.enumerate({"itemsize": 2, "shared_per_block": 65536}).legal
    assert [c["BLOCK_K"] for c in legal] == [32, 64]


def test_config_splits_constexprs_from_launch_options_and_is_hashable():
    config = Config({"BLOCK": 64, "num_warps": 4, "num_stages": 2})
    assert config.kernel_kwargs == {"BLOCK": 64}
    assert config.options == {"num_warps": 4, "num_stages": 2}
    assert config == Config({"num_stages": 2, "BLOCK": 64, "num_warps": 4})  # order does not matter
    assert len({config, Config({"num_stages": 2, "BLOCK": 64, "num_warps": 4})}) == 1
    assert config.label() == "BLOCK=64 num_warps=4 num_stages=2"


@pytest.mark.parametrize(
    "params, constraints, message",
    [
        ({}, [], "no parameters"),
        ({"BLOCK": []}, [], "BLOCK has no values: the space is empty"),
        ({"BLOCK": 64}, [], "give a list of values"),
        ({"BLOCK": [64, 64]}, [], "lists a value twice"),
        ({"BLOCK": [[64]]}, [], "not a number, bool or string"),
        ({"BLOCK": [64]}, ["BLOCK >"], "does not parse"),
        ({"BLOCK": [64]}, ["__import__('os').system('true')"], "the only functions are min, max and abs"),
        ({"BLOCK": [64]}, ["BLOCK.real > 2"], "Attribute is not allowed"),
        ({"BLOCK": [64]}, ["[BLOCK][0] > 2"], "is not allowed"),
        ({"BLOCK": [64]}, [""], "give a Python expression"),
    ],
)
def test_a_bad_space_is_one_clear_error(params, constraints, message):
    with pytest.raises(SpaceError, match=message.replace("(", r"\(")):
        ConfigSpace(params=params, constraints=constraints).enumerate()


def test_a_constraint_naming_an_unknown_value_lists_what_is_known():
    space = ConfigSpace(params={"BLOCK": [64]}, constraints=["BLOK <= 128"])
    with pytest.raises(SpaceError, match=r"'BLOK <= 128' names BLOK.*parameter \(BLOCK\).*\(M\)"):
        space.enumerate({"M": 4096})


def test_contradictory_constraints_say_which_rejected_what():
    space = ConfigSpace(params={"BLOCK": [32, 64, 128]}, constraints=["BLOCK > 64", "BLOCK < 64"])
    with pytest.raises(SpaceError, match=r"reject all 3 configs.*'BLOCK > 64' rejected 2; 'BLOCK < 64' rejected 1"):
        space.enumerate()


def test_a_constraint_that_cannot_be_evaluated_names_the_config():
    space = ConfigSpace(params={"BLOCK": [0, 64]}, constraints=["128 % BLOCK == 0"])
    with pytest.raises(SpaceError, match=r"'128 % BLOCK == 0' fails on \{'BLOCK': 0\}"):
        space.enumerate()


def test_a_parameter_may_not_shadow_a_problem_size():
    with pytest.raises(SpaceError, match="M shadow"):
        ConfigSpace(params={"M": [64]}).enumerate({"M": 4096})
