"""Communication bytes and α-β seconds: nccl-tests' bus factors, the ZeRO paper's 2Ψ
and 3Ψ, Korthikanti's four TP all-reduces a layer, hand-worked PP and CP volumes."""

from __future__ import annotations

import pytest

from snippets.sizing import traffic


def test_bus_factors_are_nccl_tests() -> None:
    # NVIDIA/nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n, the others (n-1)/n
    for n in (2, 3, 8):
        assert traffic.bus_factor("all_reduce", n) == 2 * (n - 1) / n
        assert traffic.bus_factor("all_gather", n) == (n - 1) / n
        assert traffic.bus_factor("reduce_scatter", n) == (n - 1) / n


def test_alpha_beta_seconds_by_hand() -> None:
    a, bw, B = 5e-6, 100e9, 1e9
    # ring all-reduce on 4: 6α + (6/4)·B/bw
    assert traffic.call_seconds("all_reduce", B, 4, a, bw) == pytest.approx(
        6 * a + 1.5 * B / bw
    )
    assert traffic.call_seconds("all_gather", B, 4, a, bw) == pytest.approx(
        3 * a + 0.75 * B / bw
    )
    assert traffic.call_seconds("send", B, 2, a, bw) == pytest.approx(a + B / bw)
    assert traffic.call_seconds("all_reduce", B, 1, a, bw) == 0


def test_dp_is_2psi_then_3psi() -> None:
    # ZeRO paper §7: stages 0-2 move 2Ψ (as buffers: reduce-scatter + all-gather, or
    # one all-reduce of Ψ counted twice by its bus factor), stage 3 moves 3Ψ.
    psi, n = 1000, 4
    for zero, values in ((0, 2), (1, 2), (2, 2), (3, 3)):
        calls = traffic.dp_calls(psi, 1, 1, zero, m=1)
        sent = traffic.sent_bytes(calls, n)
        assert sent == pytest.approx(values * psi * (n - 1) / n)
    # ZeRO-2 and -3 reduce every micro-batch's gradients; ZeRO-0/1 once a step
    assert traffic.sent_bytes(traffic.dp_calls(psi, 0, 1, 2, 4), n) == 4 * 750
    assert traffic.sent_bytes(traffic.dp_calls(psi, 0, 1, 1, 4), n) == 750


def test_tp_four_allreduces_a_layer_and_sp_moves_the_same() -> None:
    b, s, h, e, L, m, t = 2, 128, 64, 2, 3, 5, 4
    act = b * s * h * e
    plain = traffic.tp_calls(b, s, h, e, L, m)
    assert plain == [("all_reduce", act, 4 * L * m)]  # Korthikanti §4.2.2
    sp = traffic.tp_calls(b, s, h, e, L, m, sp=True)
    assert traffic.sent_bytes(sp, t) == traffic.sent_bytes(plain, t)
    full = traffic.tp_calls(b, s, h, e, L, m, recompute="full")
    assert full[0][2] == 6 * L * m  # the recomputed forward repeats its two


def test_pp_and_cp_volumes_by_hand() -> None:
    b, s, h, e, m = 1, 1024, 256, 2, 8
    assert traffic.pp_calls(b, s, h, e, m, p=1) == []
    one = b * s * h * e
    assert traffic.sent_bytes(traffic.pp_calls(b, s, h, e, m, 4), 4) == 2 * m * one
    assert traffic.sent_bytes(traffic.pp_calls(b, s, h, e, m, 4, v=2), 4) == (
        4 * m * one
    )
    # CP = 4, s_loc = 256, h_kv = 64, t = 2: K and V chunks 2·256·64·2/2 bytes,
    # 3 hops a layer forward, twice that backward (K, V and dK, dV)
    calls = traffic.cp_calls(b, 256, 64, e, layers=2, m=1, cp=4, t=2)
    assert traffic.sent_bytes(calls, 4) == 2 * 256 * 64 * 2 / 2 * 3 * 3 * 2


def test_link_inside_or_across_nodes() -> None:
    gpu = dict(alpha_intra=1e-6, alpha_inter=9e-6)
    assert traffic.link(8, 8, 450e9, 50e9, **gpu) == (1e-6, 450e9)
    assert traffic.link(16, 8, 450e9, 50e9, **gpu) == (9e-6, 50e9)
