"""The event loop's heap (engine/tcp/world.py): hop events queued per hop behind the heap pop in exactly
the order of one binary heap of every key (time, then scheduling order)."""
import heapq

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from offloadkit.engine import tcp as K
from offloadkit.engine.tcp import world

OPS = st.lists(st.tuples(st.sampled_from(["hop", "hop", "hop", "other", "pop", "pop"]),
                         st.integers(0, 2), st.integers(0, 5)), max_size=120)


def _world(cap: int, hops: int):
    return K.World(P=None, HP=None, HL=None, NP=None, FP=None, G=np.zeros(K.G_LEN + K.MAX_POINTS, np.int64),
                   H=np.zeros((cap, 2), np.int64), PK=np.zeros((cap, K.PK_LEN_COLS), np.int64), FREE=None,
                   AK=None, AFREE=None, F=None, FF=None, U=None, O=None, REC=None, RXQ=None, HQ=None, HS=None,
                   DROPS=None, SM=None, HELD=None, EVQ=np.full((hops, 2), -1, np.int64))


@settings(max_examples=100, deadline=None)
@given(ops=OPS)
def test_pop_order_equals_one_heap_of_every_event(ops):
    """Random pushes (hop events in and out of time order per hop, other kinds) and pops against heapq."""
    push, pop = world.heap_push.py_func, world.heap_pop.py_func
    cap = 64
    W = _world(cap, 3)
    ref, free, now, seq = [], list(range(cap)), 0, 0
    for kind, hop, dt in ops + [("pop", 0, 0)] * len(ops):
        if kind == "pop":
            if not ref:
                continue
            key, ev = heapq.heappop(ref)
            assert pop(W) == ev
            now = ev[0]
            if ev[1] == K.EV_HOP:
                free.append(ev[2])
        else:
            t = now + dt
            ev = (t, K.EV_HOP, free.pop(), hop) if kind == "hop" else (t, K.EV_TIMER, 7, 0)
            assert push(W, *ev)
            heapq.heappush(ref, ((t << K.HEAP_SHIFT) | seq, ev))
            seq += 1
        assert W.G[K.G_HN] == len(ref)
        assert W.G[K.G_HROWS] <= len(ref)


def test_a_full_heap_refuses_the_event_and_flags_it():
    W = _world(2, 1)
    push = world.heap_push.py_func
    assert push(W, 5, K.EV_HOP, 0, 0) and push(W, 6, K.EV_HOP, 1, 0)
    assert W.G[K.G_HROWS] == 1                       # the second waits behind the first
    assert not push(W, 7, K.EV_TIMER, 0, 0)
    assert W.G[K.G_OVERFLOW] & 1


def test_fresh_free_stack_hands_out_indices_as_a_written_one_would():
    """The packet pool's free stack, never written at start: n-1, n-2, ... then what was returned, last first."""
    W = _world(4, 1)._replace(FREE=np.full(4, -99, np.int64))
    W.G[K.G_FTOP] = W.G[K.G_PK_FRESH] = 4
    take, give = world.pk_alloc.py_func, world.pk_free.py_func
    got = [take(W) for _ in range(2)]
    give(W, got[0])
    got += [take(W) for _ in range(4)]
    assert got == [3, 2, 3, 1, 0, -1]
    assert W.G[K.G_OVERFLOW] & 2
