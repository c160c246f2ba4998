"""Matrix products and linear algebra: matmul over every rank combination and broadcast
batch, mm/bmm/mv/dot/outer, addmm/addmv/addr/baddbmm/addbmm with beta/alpha, einsum,
tensordot, kron, cross, trace, cdist, and a few LAPACK-backed ops (det, inv, solve,
cholesky, qr, eigvalsh, svdvals) on well-conditioned inputs."""
from ._lib import DTYPES, FLOATS, case, T, values, numel

FAM = "linalg"


def t(var, shape, dt, shift=0, pool="mod", transpose=False):
    if transpose:
        s = tuple(shape[:-2]) + (shape[-1], shape[-2])
        return "%s = inp(%s).transpose(-1, -2)\n" % (var, T(values(dt, numel(s), pool, shift), s, dt))
    return "%s = inp(%s)\n" % (var, T(values(dt, numel(shape), pool, shift), shape, dt))


MATMUL = [  # name, a shape, b shape
    ("1d-1d", (4,), (4,)), ("2d-1d", (3, 4), (4,)), ("1d-2d", (3,), (3, 4)),
    ("2d-2d", (2, 3), (3, 4)), ("3d-2d", (2, 3, 4), (4, 2)), ("2d-3d", (3, 4), (2, 4, 5)),
    ("3d-3d", (2, 3, 4), (2, 4, 2)), ("bcast-4d", (2, 1, 2, 3), (3, 3, 2)),
    ("3d-1d", (2, 3, 4), (4,)), ("1d-3d", (3,), (2, 3, 2)), ("empty-k", (2, 0), (0, 3)),
    ("empty-m", (0, 3), (3, 2)), ("mismatch", (2, 3), (4, 2)), ("0d", (), (3,)),
]


def gen():
    cs = []
    for dt in DTYPES:
        fl = dt in FLOATS
        for name, sa, sb in MATMUL:
            src = t("a", sa, dt, 0) + t("b", sb, dt, 5)
            cs.append(case("linalg/matmul/%s/%s" % (name, dt), src + "out = torch.matmul(a, b)\n",
                           ["aten::matmul"], FAM, ref64=fl, acc=True))
            if name in ("2d-2d", "3d-3d", "2d-1d"):
                cs.append(case("linalg/matmul-op/%s/%s" % (name, dt), src + "out = a @ b\n",
                               ["aten::matmul"], FAM, ref64=fl, acc=True))
                cs.append(case("linalg/matmul-out/%s/%s" % (name, dt),
                               src + "o = torch.empty(0, dtype=a.dtype)\nr = torch.matmul(a, b, out=o)\nout = (o, r is o)\n",
                               ["aten::matmul.out"], FAM, ref64=fl, acc=True))
        # long inner dimension with many significant bits: accumulation precision matters
        lk = ("a = inp(((torch.arange(2048) * 37 % 101 - 30) * {s}).to(torch.{dt}).reshape(4, 512))\n"
              "b = inp(((torch.arange(1536) * 53 % 97 - 20) * {s}).to(torch.{dt}).reshape(512, 3))\n").format(
                  s="0.0173" if fl else "1", dt=dt)
        cs.append(case("linalg/matmul/long-k/%s" % dt, lk + "out = torch.matmul(a, b)\n", ["aten::matmul"], FAM,
                       ref64=fl, acc=True))
        cs.append(case("linalg/mm/long-k-transposed/%s" % dt, lk + "out = torch.mm(b.t(), a.t())\n", ["aten::mm"], FAM,
                       ref64=fl, acc=True))
        cs.append(case("linalg/mv/long-k/%s" % dt, lk + "out = torch.mv(a, b[:, 0])\n", ["aten::mv"], FAM,
                       ref64=fl, acc=True))
        for ta in (False, True):
            for tb in (False, True):
                tag = "%s%s" % ("T" if ta else "N", "T" if tb else "N")
                src = t("a", (3, 4), dt, 0, transpose=ta) + t("b", (4, 2), dt, 3, transpose=tb)
                cs.append(case("linalg/mm/%s/%s" % (tag, dt), src + "out = torch.mm(a, b)\n", ["aten::mm"], FAM,
                               ref64=fl, acc=True))
                src3 = t("a", (2, 3, 4), dt, 0, transpose=ta) + t("b", (2, 4, 2), dt, 3, transpose=tb)
                cs.append(case("linalg/bmm/%s/%s" % (tag, dt), src3 + "out = torch.bmm(a, b)\n", ["aten::bmm"], FAM,
                               ref64=fl, acc=True))
        m = t("a", (3, 4), dt, 0) + t("b", (4, 2), dt, 3) + t("c", (3, 2), dt, 7) + t("cb", (2,), dt, 9)
        v = t("v", (4,), dt, 2) + t("w", (3,), dt, 6)
        b3 = t("p", (2, 3, 4), dt, 1) + t("q", (2, 4, 2), dt, 4) + t("r3", (2, 3, 2), dt, 8)
        for name, expr, ops in (
                ("mm-out", "torch.mm(a, b, out=torch.empty(0, dtype=a.dtype))", ["aten::mm.out"]),
                ("mm-method", "a.mm(b)", ["aten::mm"]),
                ("mm-mismatch", "torch.mm(a, a)", ["aten::mm"]),
                ("bmm-out", "torch.bmm(p, q, out=torch.empty(0, dtype=p.dtype))", ["aten::bmm.out"]),
                ("addmm", "torch.addmm(c, a, b)", ["aten::addmm"]),
                ("addmm-bcast-bias", "torch.addmm(cb, a, b)", ["aten::addmm"]),
                ("addmm-beta-alpha", "torch.addmm(c, a, b, beta=0.5, alpha=2)", ["aten::addmm"]),
                ("addmm-beta0", "torch.addmm(c.fill_(float('nan')) if c.is_floating_point() else c, a, b, beta=0)", ["aten::addmm"]),
                ("addmm-int-beta-alpha", "torch.addmm(c, a, b, beta=2, alpha=3)", ["aten::addmm"]),
                ("addmm_", "(c.addmm_(a, b), c)", ["aten::addmm_"]),
                ("addmm-out", "torch.addmm(c, a, b, out=torch.empty(0, dtype=c.dtype))", ["aten::addmm.out"]),
                ("mv", "torch.mv(a, v)", ["aten::mv"]),
                ("mv-out", "torch.mv(a, v, out=torch.empty(0, dtype=a.dtype))", ["aten::mv.out"]),
                ("addmv", "torch.addmv(w, a, v, beta=2, alpha=0.5)", ["aten::addmv"]),
                ("addmv_", "(w.addmv_(a, v), w)", ["aten::addmv_"]),
                ("dot", "torch.dot(v, v)", ["aten::dot"]),
                ("dot-out", "torch.dot(v, v, out=torch.empty(0, dtype=v.dtype))", ["aten::dot.out"]),
                ("dot-mismatch", "torch.dot(v, w)", ["aten::dot"]),
                ("vdot", "torch.vdot(v, v)", ["aten::vdot"]),
                ("inner", "torch.inner(a, a)", ["aten::inner"]),
                ("outer", "torch.outer(v, w)", ["aten::outer"]),
                ("ger", "torch.ger(w, v)", ["aten::outer"]),
                ("addr", "torch.addr(a, w, v, beta=2, alpha=3)", ["aten::addr"]),
                ("addr_", "(a.addr_(w, v), a)", ["aten::addr_"]),
                ("baddbmm", "torch.baddbmm(r3, p, q, beta=0.5, alpha=2)", ["aten::baddbmm"]),
                ("baddbmm_", "(r3.baddbmm_(p, q), r3)", ["aten::baddbmm_"]),
                ("baddbmm-int", "torch.baddbmm(r3, p, q, beta=2, alpha=3)", ["aten::baddbmm"]),
                ("addbmm", "torch.addbmm(c, p, q)", ["aten::addbmm"]),
                ("addbmm-beta-alpha", "torch.addbmm(c, p, q, beta=0.5, alpha=2)", ["aten::addbmm"]),
                ("einsum-ij,jk", "torch.einsum('ij,jk->ik', a, b)", ["aten::einsum"]),
                ("einsum-trace", "torch.einsum('ii', a[:, :3])", ["aten::einsum"]),
                ("einsum-diag", "torch.einsum('ii->i', a[:, :3])", ["aten::einsum"]),
                ("einsum-transpose", "torch.einsum('ij->ji', a)", ["aten::einsum"]),
                ("einsum-sum", "torch.einsum('ij->', a)", ["aten::einsum"]),
                ("einsum-outer", "torch.einsum('i,j->ij', v, w)", ["aten::einsum"]),
                ("einsum-batch", "torch.einsum('bij,bjk->bik', p, q)", ["aten::einsum"]),
                ("einsum-ellipsis", "torch.einsum('...ij,...jk', p, q)", ["aten::einsum"]),
                ("einsum-3op", "torch.einsum('ij,jk,k->i', a, b, cb)", ["aten::einsum"]),
                ("einsum-bhqd", "torch.einsum('bqd,bkd->bqk', p, p)", ["aten::einsum"]),
                ("einsum-list", "torch.einsum('ij,j', [a, v])", ["aten::einsum"]),
                ("tensordot", "torch.tensordot(p, q, dims=([2], [1]))", ["aten::tensordot"]),
                ("tensordot-int", "torch.tensordot(a, b, 1)", ["aten::tensordot"]),
                ("tensordot-0", "torch.tensordot(v, w, 0)", ["aten::tensordot"]),
                ("kron", "torch.kron(a[:2, :2], b[:2])", ["aten::kron"]),
                ("trace", "torch.trace(a)", ["aten::trace"]),
                ("cross", "torch.linalg.cross(a[:, :3], c[:, :1].expand(3, 3))", ["aten::linalg_cross"]),
                ("cross-dim", "torch.cross(a[:, :3], a[:, 1:], dim=1)", ["aten::cross"]),
                ("multi_dot", "torch.linalg.multi_dot([a, b, b.t()])", ["aten::linalg_multi_dot"]),
                ("chain_matmul", "torch.chain_matmul(a, b, b.t())", ["aten::chain_matmul"]),
                ("linalg.matmul", "torch.linalg.matmul(a, b)", ["aten::linalg_matmul"]),
                ("linalg.vecdot", "torch.linalg.vecdot(a, a)", ["aten::linalg_vecdot"]),
                ("cdist", "torch.cdist(a, a[:2])", ["aten::cdist"]),
                ("cdist-p1", "torch.cdist(a, a[:2], p=1)", ["aten::cdist"]),
                ("dist", "torch.dist(a, c[:, :1])", ["aten::dist"]),
                ("pdist", "torch.pdist(a)", ["aten::pdist"]),
                ("matrix_power-3", "torch.linalg.matrix_power(a[:, :3], 3)", ["aten::linalg_matrix_power"]),
                ("matrix_power-0", "torch.matrix_power(a[:, :3], 0)", ["aten::matrix_power"]),
                ("tril-mm", "torch.tril(a[:, :3]) @ a[:, :3]", ["aten::matmul"]),
        ):
            cs.append(case("linalg/%s/%s" % (name, dt), m + v + b3 + "out = %s\n" % expr, ops, FAM,
                           ref64=fl, acc=True))
    # LAPACK-backed: float32/float64 on a well-conditioned matrix
    for dt in ("float32", "float64", "float16", "int64"):
        fl = dt in FLOATS
        spd = ("a = inp(torch.tensor([[4.0, 1.0, 0.5], [1.0, 3.0, 0.25], [0.5, 0.25, 2.0]], dtype=torch.%s))\n"
               "b = inp(torch.tensor([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]], dtype=torch.%s))\n" % (dt, dt))
        for name, expr, ops in (
                ("det", "torch.linalg.det(a)", ["aten::linalg_det"]),
                ("det-old", "torch.det(a)", ["aten::det"]),
                ("slogdet", "torch.linalg.slogdet(a)", ["aten::linalg_slogdet"]),
                ("logdet", "torch.logdet(a)", ["aten::logdet"]),
                ("inv", "torch.linalg.inv(a)", ["aten::linalg_inv"]),
                ("inverse", "torch.inverse(a)", ["aten::inverse"]),
                ("solve", "torch.linalg.solve(a, b)", ["aten::linalg_solve"]),
                ("cholesky", "torch.linalg.cholesky(a)", ["aten::linalg_cholesky"]),
                ("eigvalsh", "torch.linalg.eigvalsh(a)", ["aten::linalg_eigvalsh"]),
                ("svdvals", "torch.linalg.svdvals(b)", ["aten::linalg_svdvals"]),
                ("matrix_rank", "torch.linalg.matrix_rank(b)", ["aten::linalg_matrix_rank.atol_rtol_tensor"]),
                ("pinv", "torch.linalg.pinv(b)", ["aten::linalg_pinv.atol_rtol_tensor"]),
                ("lstsq-solution", "torch.linalg.lstsq(a, b).solution", ["aten::linalg_lstsq"]),
                ("cond", "torch.linalg.cond(a)", ["aten::linalg_cond"]),
                ("nuc-norm", "torch.linalg.matrix_norm(a, 'nuc')", ["aten::linalg_matrix_norm.str_ord"]),
                ("triangular_solve", "torch.linalg.solve_triangular(torch.linalg.cholesky(a), b, upper=False)",
                 ["aten::linalg_solve_triangular"]),
                ("cholesky_solve", "torch.cholesky_solve(b, torch.linalg.cholesky(a))", ["aten::cholesky_solve"]),
                ("qr-r-abs", "torch.linalg.qr(a).R.abs()", ["aten::linalg_qr"]),
                ("lu_factor-LU", "torch.linalg.lu_factor(a)", ["aten::linalg_lu_factor"]),
        ):
            cs.append(case("linalg/%s/%s" % (name, dt), spd + "out = %s\n" % expr, ops, FAM,
                           ref64=fl, acc=True))
    return cs


CASES = gen()
