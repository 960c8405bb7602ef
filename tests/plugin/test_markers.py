"""bench_sizes and bench_precision become parameters with readable ids; bad arguments are
errors naming the culprit."""


def test_sizes_cartesian_product_with_readable_ids(pytester):
    pytester.makepyfile("""
        import pytest
        @pytest.mark.bench_sizes(M=[1, 2], N=[3])
        def test_a(M, N):
            assert N == 3
    """)
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(["*test_a[[]M1-N3[]]", "*test_a[[]M2-N3[]]"])


def test_generated_ids_are_stable_and_k_selects_them(pytester):
    """The id form keys baselines: a change here orphans every saved benchmark (docs/usage.md)."""
    from pytest_tesserabench.markers import param_id, precision_id
    from pytest_tesserabench.measure.precision import Precision

    assert [param_id("M", 4096), param_id("scale", 0.5), param_id("shift", -1), param_id("D2", 64)] == [
        "M4096",
        "scale0.5",
        "shift-1",
        "D2_64",
    ]
    assert [param_id("causal", True), param_id("layout", "row major"), param_id("mode", "a=b")] == [
        "causal_True",
        "layout_row_major",
        "mode_a_b",
    ]
    assert [precision_id(Precision.parse(p)) for p in ("bf16", "fp8_e4m3@accum(fp32)", "fp16@accum(fp16)")] == [
        "bf16",
        "fp8_e4m3",
        "fp16_accum_fp16",
    ]
    pytester.makepyfile("""
        import pytest
        @pytest.mark.bench_sizes(M=[1024, 4096], N=[4096])
        @pytest.mark.bench_precision("bf16", "fp16@accum(fp16)")
        def test_mm(M, N, precision):
            pass
    """)
    result = pytester.runpytest("-v", "-k", "M4096-N4096-bf16 or fp16_accum_fp16 and M1024")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_mm[[]M4096-N4096-bf16[]] PASSED*"])
    result.stdout.fnmatch_lines(["*test_mm[[]M1024-N4096-fp16_accum_fp16[]] PASSED*"])


def test_sizes_explicit_points(pytester):
    pytester.makepyfile("""
        import pytest
        @pytest.mark.bench_sizes([{"M": 1, "K": 8}, {"M": 4, "K": 2}])
        def test_a(M, K):
            assert M * K == 8
    """)
    pytester.runpytest("-v").assert_outcomes(passed=2)


def test_sizes_with_precision_and_parametrize(pytester):
    pytester.makepyfile("""
        import pytest
        from pytest_tesserabench import Precision
        @pytest.mark.parametrize("causal", [True])
        @pytest.mark.bench_precision("fp16", "fp8_e4m3@accum(fp32)", "fp16@accum(fp16)")
        @pytest.mark.bench_sizes(S=[128])
        def test_a(S, causal, precision):
            assert isinstance(precision, Precision)
    """)
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "*test_a[[]S128-fp16-True[]]",
            "*test_a[[]S128-fp8_e4m3-True[]]",
            "*test_a[[]S128-fp16_accum_fp16-True[]]",
        ]
    )


def test_unknown_size_axis_fails_that_test_naming_it_and_the_rest_of_the_file_runs(pytester):
    pytester.makepyfile("""
        import pytest
        @pytest.mark.bench_sizes(M=[1], K=[2])
        def test_a(M):
            pass

        @pytest.mark.bench_sizes(M=[1, 2])
        def test_b(M):
            pass

        def test_c():
            pass
    """)
    result = pytester.runpytest()
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(
        ["*ERROR at setup of test_a*", "*bench_sizes on *test_a: K is not an argument of the test*"]
    )
    assert "Traceback" not in result.stdout.str() and "fixture 'M' not found" not in result.stdout.str()


def test_points_with_different_keys_are_refused(pytester):
    pytester.makepyfile("""
        import pytest
        @pytest.mark.bench_sizes([{"M": 1}, {"N": 2}])
        def test_a(M, N):
            pass
    """)
    pytester.runpytest().stdout.fnmatch_lines(["*point 1 has keys [[]'N'[]]*every point needs the same keys*"])


def test_unknown_precision_is_a_collection_error(pytester):
    pytester.makepyfile("""
        import pytest
        @pytest.mark.bench_precision("bf16", "fp4")
        def test_a(precision):
            pass
    """)
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*bench_precision on *test_a: unknown storage type 'fp4'*choose one of fp32, tf32*"])


def test_precision_marker_needs_the_argument(pytester):
    pytester.makepyfile("""
        import pytest
        @pytest.mark.bench_precision("bf16")
        def test_a():
            pass
    """)
    pytester.runpytest().stdout.fnmatch_lines(["*the test has no `precision` argument*"])


def test_markers_are_registered(pytester):
    pytester.makeini("[pytest]\naddopts = --strict-markers\n")
    pytester.makepyfile("""
        import pytest
        @pytest.mark.bench(max_time=1)
        @pytest.mark.bench_sizes(n=[1])
        @pytest.mark.bench_precision("fp32")
        def test_a(n, precision):
            pass
    """)
    pytester.runpytest().assert_outcomes(passed=1)
