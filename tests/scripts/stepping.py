"""Calls, a generator and a loop to step through: where `s`, `n`, `r`, `unt`, `b` and `c` land
under ddptui is where they land under stock pdb (plain Python, no torch)."""

from stepping_lib import apply


def leaf(i):
    return i * 2


def middle(i):
    total = 0
    for j in range(3):
        total += leaf(j)
    return total + i


def gen(n):
    for i in range(n):
        yield middle(i)


breakpoint()
values = list(gen(3))
result = middle(10)
doubled = apply(leaf, [5, 6])
print("result", result, sum(values), doubled)
