"""The bench workloads of tilefuse (bench/workloads.go) in PyTorch, at the
same sizes, float32, timed the way tilefuse's device times are: CUDA events
around one run, inputs already on the device, median of runs after warm-up.

Modes: eager (the graph op by op, as the Gorgonia graph is written), library
(eager with PyTorch's own fused op where one exists: F.softmax, F.layer_norm,
F.gelu(approximate="tanh"), SDPA), and compiled (torch.compile of the op-by-op
code, Inductor -> Triton). Training workloads run forward and backward;
mlp_train and encoder_train are whole training steps (batch up from host
memory, forward, backward, torch.optim.Adam(fused=True).step(), loss.item()),
eager and library only, timed by the host's wall clock around the whole step
(time.perf_counter: the step ends in loss.item(), which waits for its
kernels), as tilefuse's training steps are; --precisions fp32,tf32,bf16 times
them in strict fp32,
with TF32 products, and under bf16 autocast (float32 inputs, the products and
SDPA in bfloat16: the twin of tilefuse bench -precision bf16, whose products
round float32 operands to bfloat16; tilefuse's tf32x3 has no PyTorch twin).

Size peer (bench.Peer: --sizes peer) is the issue's shapes, for the workloads
that have it: softmax and LayerNorm at 8192x4096, 32768x1024, 4096x32768,
1823x781 and 1151x8192 (softmax also with Triton's tutorial kernel where
Triton is installed), the chain at 64M elements (each its own size
peer:RxC, peer:64M, as tilefuse bench -size peer names them); the BERT-base encoder layer (batch 8, sequence 512, model 768, 12
heads, FF 3072; its library mode projects all heads at once and runs SDPA on
[batch, heads, seq, dh]) and attention at B4 H16 S2048 D64 (attention,
attention_fwd_bwd) and B2 H16 S4096 D128 (attention_d128). --precisions
fp32,tf32 runs each in strict fp32 and with TF32 products.

--device cpu runs everything on the CPU (torch.set_num_threads(--threads),
all cores by default), timed by the host's wall clock around one call (eager
CPU ops return when done), to set beside tilefuse bench -backend cpu on the
same machine (scripts/cpu-bench.sh runs both); Triton's softmax is left out.

usage: python3 bench/torch/workloads.py [--runs 50] [--json out.json] [--compile-sizes large]
       python3 bench/torch/workloads.py --device cpu [--threads 16] [--compile-sizes small]
       python3 bench/torch/workloads.py --sizes peer --precisions fp32,tf32
       python3 bench/torch/workloads.py --peer [--workload 4096] [--peer-compile 0]
"""
import argparse, json, math, platform, statistics, sys, time

import torch
import torch.nn.functional as F

dev = "cuda"
torch.backends.cuda.matmul.allow_tf32 = False  # strict fp32, as tilefuse's ieee dots
torch.backends.cudnn.allow_tf32 = False


def sync():
    """waits for the device's work (nothing to wait for on the CPU)"""
    if dev == "cuda":
        torch.cuda.synchronize()


def device_name():
    if dev == "cuda":
        return torch.cuda.get_device_name()
    return f"CPU {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"


def rnd(scale, *shape, g):
    return ((torch.rand(*shape, generator=g, device=dev) * 2 - 1) * scale).contiguous()


def gelu(x):  # tanh form, as bench/workloads.go writes it
    inner = (x + x * x * x * 0.044715) * math.sqrt(2 / math.pi)
    return x * (torch.tanh(inner) + 1) * 0.5


def layer_norm(x, gamma, beta):
    mu = x.mean(1, keepdim=True)
    xc = x - mu
    v = (xc * xc).mean(1, keepdim=True)
    rstd = 1 / torch.sqrt(v + 1e-5)
    return xc * rstd * gamma + beta


def softmax_ops(x):
    e = torch.exp(x - x.amax(1, keepdim=True))
    return e / e.sum(1, keepdim=True)


def pick(size, small, large, peer=None):
    if size == "peer":
        if peer is None:
            raise ValueError("this workload has no size peer")
        return peer
    return small if size == "small" else large


def chain(size, g):
    n = (1 << 26) if size == "peer:64M" else pick(size, 1 << 16, 1 << 22)
    x = rnd(2, n // 1024, 1024, g=g)
    ops = lambda x: gelu(x * 0.5 + 1) * 2
    lib = lambda x: F.gelu(x * 0.5 + 1, approximate="tanh") * 2
    return (x,), ops, lib, 0


def softmax(size, g):
    r, c = row_shape(size, 64, 4096)
    x = rnd(4, r, c, g=g)
    return (x,), softmax_ops, lambda x: F.softmax(x, 1), 0


def layernorm(size, g):
    r, c = row_shape(size, 64, 4096)
    x = rnd(4, r, c, g=g)
    gamma, beta = rnd(1, c, g=g), rnd(1, c, g=g)
    return (x, gamma, beta), layer_norm, lambda x, a, b: F.layer_norm(x, (c,), a, b, 1e-5), 0


def colsum(size, g):
    """a bias's gradient: column sums over rows (bench/workloads.go colSum)"""
    if size.startswith("peer:"):
        r, c = (int(v) for v in size[len("peer:"):].split("x"))
    else:
        r, c = pick(size, 1000, 8192), (777 if size == "small" else 1024)
    dy = rnd(1, r, c, g=g)
    return (dy,), lambda dy: dy.sum(0), lambda dy: torch.sum(dy, dim=0), 0


def linear_gelu(size, g):
    m = pick(size, 128, 1024)
    x, w, b = rnd(1, m, m, g=g), rnd(1 / math.sqrt(m), m, m, g=g), rnd(1, m, g=g)
    return (x, w, b), lambda x, w, b: gelu(x @ w + b), lambda x, w, b: F.gelu(torch.addmm(b, x, w), approximate="tanh"), 2 * m ** 3


PEER_WORKLOADS = {"attention", "attention_d128", "attention_fwd_bwd", "encoder_fwd", "encoder_fwd_bwd", "encoder_train"}

# The row workloads' and the chain's peer sizes (bench.PeerRows,
# bench.PeerChain in bench/workloads.go): each shape its own size, as
# tilefuse bench -size peer names them.
PEER_ROWS = [(8192, 4096), (32768, 1024), (4096, 32768), (1823, 781), (1151, 8192)]
PEER_SIZES = {
    "chain": ["peer:64M"],
    "softmax": [f"peer:{r}x{c}" for r, c in PEER_ROWS],
    "layernorm": [f"peer:{r}x{c}" for r, c in PEER_ROWS],
    "colsum": ["peer:4096x3072", "peer:4096x768"],
}


def peer_sizes(name):
    """the sizes --sizes peer stands for, for workload name"""
    if name in PEER_WORKLOADS:
        return ["peer"]
    return PEER_SIZES.get(name, [])


def row_shape(size, small, large):
    if size.startswith("peer:"):
        r, c = (int(v) for v in size[len("peer:"):].split("x"))
        return r, c
    return pick(size, small, large), 1024


try:  # Triton's tutorial softmax (python/tutorials/02-fused-softmax.py, the classic form)
    import triton
    import triton.language as tl

    @triton.jit
    def _tutorial_softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK_SIZE: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_SIZE)
        x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float("inf"))
        num = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)

    def triton_softmax(x):
        n_rows, n_cols = x.shape
        block = triton.next_power_of_2(n_cols)
        warps = 16 if block >= 4096 else 8 if block >= 2048 else 4
        y = torch.empty_like(x)
        _tutorial_softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, num_warps=warps, BLOCK_SIZE=block)
        return y
except ImportError:  # no Triton: the mode is left out
    triton_softmax = None


def attention(size, g, d=64, backward=False):
    """softmax(q·kᵀ/√d)·v over batch × heads; with backward, the loss
    mean(out²) and the gradients of q, k and v (flops: FlashAttention's
    convention, 4·bh·s²·d forward and 10·bh·s²·d backward)"""
    if d == 128:
        bh, s = pick(size, 4, 16, 2 * 16), pick(size, 64, 512, 4096)
    else:
        bh, s = pick(size, 8, 32, 4 * 16), pick(size, 128, 512, 2048)
    q, k, v = (rnd(1, bh, s, d, g=g) for _ in range(3))
    ops = lambda q, k, v: softmax_ops_last(q @ k.transpose(1, 2) * (1 / math.sqrt(d))) @ v
    lib = lambda q, k, v: F.scaled_dot_product_attention(q, k, v)
    flops = 4 * bh * s * s * d
    if not backward:
        return (q, k, v), ops, lib, flops
    params = [q.requires_grad_(), k.requires_grad_(), v.requires_grad_()]
    return ((q, k, v), grads_of(lambda q, k, v: (ops(q, k, v) ** 2).mean(), params),
            grads_of(lambda q, k, v: (lib(q, k, v) ** 2).mean(), params), flops * 14 // 4)


def softmax_ops_last(x):
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def grads_of(loss_fn, params):
    def step(*args):
        for p in params:
            p.grad = None
        loss = loss_fn(*args)
        loss.backward()
        return loss
    return step


def mlp_step(size, g):
    batch = pick(size, 64, 512)
    i, h, o = pick(size, 256, 784), pick(size, 512, 1024), 16
    x, y = rnd(1, batch, i, g=g), rnd(1, batch, o, g=g)
    w1, b1 = rnd(1 / math.sqrt(i), i, h, g=g), rnd(0.1, h, g=g)
    w2, b2 = rnd(1 / math.sqrt(h), h, o, g=g), rnd(0.1, o, g=g)
    params = [p.requires_grad_() for p in (w1, b1, w2, b2)]

    def loss_ops(x, y):
        p = gelu(x @ w1 + b1) @ w2 + b2
        return ((p - y) ** 2).mean()

    def loss_lib(x, y):
        p = F.linear(F.gelu(F.linear(x, w1.t(), b1), approximate="tanh"), w2.t(), b2)
        return F.mse_loss(p, y)

    return (x, y), grads_of(loss_ops, params), grads_of(loss_lib, params), 3 * 2 * batch * (i * h + h * o)


def mlp_train(size, g):
    """mlp_step as a training loop, the whole step as a user writes it (as
    tilefuse's mlp_train times it): the batch up from host memory, forward,
    backward, torch.optim.Adam(fused=True).step(), loss.item()"""
    batch = pick(size, 64, 512)
    i, h, o = pick(size, 256, 784), pick(size, 512, 1024), 16
    x, y = rnd(1, batch, i, g=g).cpu(), rnd(1, batch, o, g=g).cpu()
    w1, b1 = rnd(1 / math.sqrt(i), i, h, g=g), rnd(0.1, h, g=g)
    w2, b2 = rnd(1 / math.sqrt(h), h, o, g=g), rnd(0.1, o, g=g)
    params = [p.requires_grad_() for p in (w1, b1, w2, b2)]

    def loss_ops(x, y):
        p = gelu(x @ w1 + b1) @ w2 + b2
        return ((p - y) ** 2).mean()

    def loss_lib(x, y):
        p = F.linear(F.gelu(F.linear(x, w1.t(), b1), approximate="tanh"), w2.t(), b2)
        return F.mse_loss(p, y)

    def train(loss_fn):
        opt = torch.optim.Adam(params, lr=1e-3, fused=True)

        def step(xh, yh):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(xh.to(dev), yh.to(dev))
            loss.backward()
            opt.step()
            return loss.item()
        return step

    return (x, y), train(loss_ops), train(loss_lib), 3 * 2 * batch * (i * h + h * o)


def encoder(size, g, backward):
    x, block, params, flops = encoder_parts(size, g, backward)
    if not backward:
        return (x,), lambda x: block(x, False), lambda x: block(x, True), flops
    return ((x,), grads_of(lambda x: (block(x, False) ** 2).mean(), params),
            grads_of(lambda x: (block(x, True) ** 2).mean(), params), 3 * flops)


def encoder_train(size, g):
    """encoder_fwd_bwd as a training loop, the whole step as a user writes it
    (as tilefuse's encoder_train times it): the batch up from host memory,
    forward, the loss mean(out²), backward, torch.optim.Adam(fused=True).step()
    (learn rate 1e-3), loss.item()"""
    x, block, params, flops = encoder_parts(size, g, True)
    x = x.cpu()

    def train(lib):
        opt = torch.optim.Adam(params, lr=1e-3, fused=True)

        def step(xh):
            opt.zero_grad(set_to_none=True)
            loss = (block(xh.to(dev), lib) ** 2).mean()
            loss.backward()
            opt.step()
            return loss.item()
        return step

    return (x,), train(False), train(True), 3 * flops


def encoder_parts(size, g, backward):
    """the encoder block's batch x, the block (x, lib) -> out, its parameters
    and the forward's flops"""
    batch = pick(size, 2, 8, 8)
    s, d, nh = pick(size, 64, 128, 512), pick(size, 128, 256, 768), pick(size, 4, 8, 12)
    ff, dh = 4 * d, d // nh
    x = rnd(1, batch * s, d, g=g)
    wq, wk, wv = (rnd(1 / math.sqrt(d), nh, d, dh, g=g) for _ in range(3))
    wo = rnd(1 / math.sqrt(d), d, d, g=g)
    ln1g, ln1b = rnd(1, d, g=g), rnd(0.1, d, g=g)
    w1, b1 = rnd(1 / math.sqrt(d), d, ff, g=g), rnd(0.1, ff, g=g)
    w2, b2 = rnd(1 / math.sqrt(ff), ff, d, g=g), rnd(0.1, d, g=g)
    ln2g, ln2b = rnd(1, d, g=g), rnd(0.1, d, g=g)
    params = [wq, wk, wv, wo, ln1g, ln1b, w1, b1, w2, b2, ln2g, ln2b]
    if backward:
        for p in params:
            p.requires_grad_()

    def block(x, lib):
        if lib:  # as a PyTorch user writes it: every head's projection at once, SDPA over [batch, heads, seq, dh]
            w = torch.cat([t.permute(1, 0, 2).reshape(d, nh * dh) for t in (wq, wk, wv)], 1)
            q, k, v = (t.view(batch, s, nh, dh).transpose(1, 2) for t in (x @ w).split(nh * dh, 1))
            att = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(batch * s, d)
        else:  # as the Gorgonia graph is written: per-head projections, a concat
            heads = []
            for i in range(nh):
                q = (x @ wq[i]).view(batch, s, dh)
                k = (x @ wk[i]).view(batch, s, dh)
                v = (x @ wv[i]).view(batch, s, dh)
                o = softmax_ops_last(q @ k.transpose(1, 2) * (1 / math.sqrt(dh))) @ v
                heads.append(o.reshape(batch * s, dh))
            att = torch.cat(heads, 1)
        ln = (lambda x, a, b: F.layer_norm(x, (d,), a, b, 1e-5)) if lib else layer_norm
        act = (lambda x: F.gelu(x, approximate="tanh")) if lib else gelu
        h1 = ln(x + att @ wo, ln1g, ln1b)
        m = act(h1 @ w1 + b1) @ w2 + b2
        return ln(h1 + m, ln2g, ln2b)

    n = batch * s
    flops = 2 * n * (3 * d * d + d * d + 2 * d * ff) + batch * nh * 4 * s * s * dh
    return x, block, params, flops


def convnet(size, g):
    """Gorgonia's convnet example as bench/workloads.go convNet writes it:
    three 3×3 convolutions (padding 1) of 32, 64 and 128 filters, each with
    ReLU and a 2×2 max pool, dense 1152→625 with ReLU, 625→10, softmax,
    -mean(log(p)·y); the loss's gradients of the five weights"""
    batch = pick(size, 4, 100)
    x, y = rnd(1, batch, 1, 28, 28, g=g), rnd(1, batch, 10, g=g)
    ws, cin, hw, flops, first = [], 1, 28, 0, 0
    for cout in (32, 64, 128):
        ws.append(rnd(1 / math.sqrt(9 * cin), cout, cin, 3, 3, g=g))
        f = 2 * batch * hw * hw * 9 * cin * cout
        first = first or f
        flops += f
        cin, hw = cout, hw // 2
    flat = cin * hw * hw
    ws += [rnd(1 / math.sqrt(flat), flat, 625, g=g), rnd(1 / math.sqrt(625), 625, 10, g=g)]
    flops += 2 * batch * (flat * 625 + 625 * 10)
    params = [w.requires_grad_() for w in ws]

    def features(x):
        for w in params[:3]:
            x = F.max_pool2d(F.relu(F.conv2d(x, w, padding=1)), 2)
        return F.relu(x.reshape(x.shape[0], -1) @ params[3]) @ params[4]

    def loss_ops(x, y):
        return -(torch.log(softmax_ops_last(features(x))) * y).mean()

    def loss_lib(x, y):
        return -(F.log_softmax(features(x), dim=1) * y).mean()

    return (x, y), grads_of(loss_ops, params), grads_of(loss_lib, params), 3 * flops - first


WORKLOADS = {
    "chain": chain, "softmax": softmax, "layernorm": layernorm, "colsum": colsum, "linear_gelu": linear_gelu,
    "attention": attention, "attention_d128": lambda s, g: attention(s, g, d=128),
    "attention_fwd_bwd": lambda s, g: attention(s, g, backward=True), "mlp_step": mlp_step, "mlp_train": mlp_train, "encoder_train": encoder_train,
    "encoder_fwd": lambda s, g: encoder(s, g, False), "encoder_fwd_bwd": lambda s, g: encoder(s, g, True),
    "convnet": convnet,
}


DEVICE_BATCH = 1  # --device-batch


def device_time(fn, args, runs, warm_s=0.1):
    """median seconds of one call, by CUDA events around it (on the CPU by
    the wall clock: wall_time); with --device-batch K > 1, the median over
    runs batches of the mean of K calls back to back between two events, the
    batches one after another (as tilefuse bench -device-batch K times its
    graphs and the copy roofline is timed)"""
    if dev == "cpu":
        return wall_time(fn, args, runs, warm_s)
    t0 = time.time()
    fn(*args)
    while time.time() - t0 < warm_s:
        fn(*args)
    torch.cuda.synchronize()
    if DEVICE_BATCH > 1:
        evs = [torch.cuda.Event(enable_timing=True) for _ in range(runs + 1)]
        torch.cuda._sleep(1_000_000)  # ~0.5 ms: the device busy while the host queues the first calls
        evs[0].record()
        for e in evs[1:]:
            for _ in range(DEVICE_BATCH):
                fn(*args)
            e.record()
        evs[-1].synchronize()
        return statistics.median(a.elapsed_time(b) / 1e3 / DEVICE_BATCH for a, b in zip(evs, evs[1:]))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(runs):
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def wall_time(fn, args, runs, warm_s=0.1):
    """median seconds of one call by the host's wall clock (time.perf_counter
    around it), for the training steps: each ends in loss.item(), which waits
    for the step's kernels, the optimizer's included, as tilefuse's
    mlp_train and encoder_train time the whole step"""
    t0 = time.time()
    fn(*args)
    while time.time() - t0 < warm_s:
        fn(*args)
    sync()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


TRAIN_STEPS = {"mlp_train", "encoder_train"}


# The shapes of `tilefuse peer` (cmd/tilefuse/peer.go): y = x·W or
# gelu(x·W + b), x m×k, W k×n, uniform in ±1 (W in ±1/√k); ta: x stored
# transposed (k×m in memory, y = xᵀ·W as a weight gradient reads it), tb: W
# stored transposed (n×k, y = x·Wᵀ as an input gradient reads it). Names
# give m×n×k.
PEER = [
    ("matmul 4096³", 4096, 4096, 4096, False),
    ("linear_gelu 4096³", 4096, 4096, 4096, True),
    ("matmul NT 4096³", 4096, 4096, 4096, False, False, True),
    ("matmul 1024³", 1024, 1024, 1024, False),
    ("matmul 1000³", 1000, 1000, 1000, False),
    # fewer than a wave of 128×128 tiles; GELU's epilogue at 1024³
    ("matmul 2048×1024×1024", 2048, 1024, 1024, False),
    ("matmul 512³", 512, 512, 512, False),
    ("linear_gelu 1024³", 1024, 1024, 1024, True),
    ("matmul NT 1024³", 1024, 1024, 1024, False, False, True),
    ("matmul TN 1024³", 1024, 1024, 1024, False, True, False),
    # under a quarter wave: the encoder's FF2 and its projections
    ("matmul 1024×256×1024", 1024, 1024, 256, False),
    ("matmul 1024×256×256", 1024, 256, 256, False),
    # the MLP step's first layer (512 × 784 → 1024)
    ("matmul 512×1024×784", 512, 784, 1024, False),
    # A·Bᵀ under a quarter wave
    ("matmul NT 512×1024×784", 512, 784, 1024, False, False, True),
    ("matmul NT 1024×256×1024", 1024, 1024, 256, False, False, True),
    ("matmul NT 512³", 512, 512, 512, False, False, True),
    ("matmul 4095×4097×33", 4095, 33, 4097, False),
    ("matmul 4096×4096×50", 4096, 50, 4096, False),
    ("matmul 4096×4096×32", 4096, 32, 4096, False),
    ("matmul 4096×4096×64", 4096, 64, 4096, False),
    # K = 50's neighbour at nearly its FLOPs, and 4095×4097×33's oddities
    # one at a time (odd output rows, odd K, odd M)
    ("matmul 4096×4096×48", 4096, 48, 4096, False),
    ("matmul 4096×4097×32", 4096, 32, 4097, False),
    ("matmul 4096×4096×33", 4096, 33, 4096, False),
    ("matmul 4095×4096×32", 4095, 32, 4096, False),
    # K past a multiple of 32, and odd M with odd N at K = 32
    ("matmul 4096×4096×34", 4096, 34, 4096, False),
    ("matmul 4096×4096×36", 4096, 36, 4096, False),
    ("matmul 4096×4096×40", 4096, 40, 4096, False),
    ("matmul 4095×4097×32", 4095, 32, 4097, False),
    # odd N's effects apart: aligned rows with a last column of tiles 4
    # wide (4100), 33 whole tiles (4224)
    ("matmul 4096×4100×32", 4096, 32, 4100, False),
    ("matmul 4096×4224×32", 4096, 32, 4224, False),
    # 4096³'s output at other depths (time against K: a tile's fixed cost)
    ("matmul 4096×4096×1024", 4096, 1024, 4096, False),
    ("matmul 4096×4096×2048", 4096, 2048, 4096, False),
    ("matmul 4096×4096×8192", 4096, 8192, 4096, False),
    # odd shapes at least 1024 on every side, beside 4096³ and 1024³
    ("matmul 4095×4097×4099", 4095, 4099, 4097, False),
    ("matmul 4096×4096×4099", 4096, 4099, 4096, False),
    ("matmul 4096×4097×4096", 4096, 4096, 4097, False),
    ("matmul 4095×4096×4096", 4095, 4096, 4096, False),
    ("matmul 1025³", 1025, 1025, 1025, False),
    ("matmul 4096×4096×4100", 4096, 4100, 4096, False),
    ("matmul 4096×4100×4096", 4096, 4096, 4100, False),
    ("matmul 4096×1024×784", 4096, 784, 1024, False),
    ("matmul 1024×4097×4096", 1024, 4096, 4097, False),
    ("matmul 768×4097×4096", 768, 4096, 4097, False),
    ("vocab TN 50257×768×4096", 50257, 4096, 768, False, True, False),
    ("matmul NT 4096×4096×4099", 4096, 4099, 4096, False, False, True),
    # the BERT-base encoder layer's products (8×512 rows, model 768, FF 3072)
    ("bert NN 4096×3072×768", 4096, 768, 3072, False),
    ("bert NN gelu 4096×3072×768", 4096, 768, 3072, True),
    ("bert NN 4096×768×3072", 4096, 3072, 768, False),
    ("bert NN 4096×768×768", 4096, 768, 768, False),
    ("bert NT 4096×768×3072", 4096, 3072, 768, False, False, True),
    ("bert NT 4096×3072×768", 4096, 768, 3072, False, False, True),
    ("bert NT 4096×768×768", 4096, 768, 768, False, False, True),
    ("bert TN 768×3072×4096", 768, 4096, 3072, False, True, False),
    ("bert TN 3072×768×4096", 3072, 4096, 768, False, True, False),
    ("bert TN 768×768×4096", 768, 4096, 768, False, True, False),
    ("bert NN 768×3072×4096", 768, 4096, 3072, False),
    ("bert NN 3072×768×4096", 3072, 4096, 768, False),
    # vocabulary projections: BERT's 30522 words, GPT-2's 50257
    ("vocab 4096×30522×768", 4096, 768, 30522, False),
    ("vocab 4096×50257×768", 4096, 768, 50257, False),
    ("vocab NT 4096×50257×768", 4096, 768, 50257, False, False, True),
    # a language model's logits over 16×4096 tokens: 3.3 billion outputs
    ("logits NT 65536×50257×768", 65536, 768, 50257, False, False, True),
    # the layer's products at 4000 tokens: rows not whole tiles
    ("bert NN 4000×3072×768", 4000, 768, 3072, False),
    ("bert NN 4000×768×3072", 4000, 3072, 768, False),
]


def peer(a):
    """cuBLAS strict fp32, TF32 and bf16 (and torch.compile with TF32 for the
    gelu case) at tilefuse peer's shapes, each with its error against float64
    on the same inputs: the largest error over the largest magnitude, and the
    relative error in the 2-norm."""
    rows = []
    for name, m, k, n, gl, *trans in PEER:
        ta, tb = trans or (False, False)
        if a.workload != "all" and a.workload not in name:
            continue
        g = torch.Generator(device=dev).manual_seed(7)
        x, w, b = rnd(1, m, k, g=g), rnd(1 / math.sqrt(k), k, n, g=g), rnd(1, n, g=g)
        # transposed operands: views of the transposed storage, as autograd's
        # gradients pass them to cuBLAS
        if ta:
            x = x.t().contiguous().t()
        if tb:
            w = w.t().contiguous().t()
        # a huge output (the logits: 3.3 billion elements, 26 GB in float64):
        # errors over 4096 rows spread over it
        sel = torch.linspace(0, m - 1, 4096, device=dev).long() if m * n > 1 << 30 else None
        ref = (x if sel is None else x[sel]).double() @ w.double()
        if gl:
            ref = gelu(ref + b.double())
        xb, wb, bb = x.bfloat16(), w.bfloat16(), b.bfloat16()
        if gl:
            f32 = lambda x, w, b: F.gelu(torch.addmm(b, x, w), approximate="tanh")
            modes = [("strict fp32", False, f32, (x, w, b)), ("tf32", True, f32, (x, w, b)),
                     ("bf16", False, f32, (xb, wb, bb)), ("torch.compile tf32", True, "compile", (x, w, b))]
        else:
            mm = lambda x, w: x @ w
            modes = [("strict fp32", False, mm, (x, w)), ("tf32", True, mm, (x, w)), ("bf16", False, mm, (xb, wb))]
        for mode, tf32, fn, args in modes:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            if fn == "compile":
                if not a.peer_compile:
                    continue
                fn = torch.compile(lambda x, w, b: gelu(x @ w + b))
            t = device_time(fn, args, a.runs)
            out = fn(*args)
            out = (out if sel is None else out[sel]).double()
            err = (out - ref).abs()
            row = {"name": name, "mode": mode, "s": t, "tflops": 2 * m * n * k / t / 1e12,
                   "max_err": (err.max() / ref.abs().max()).item(), "norm_err": (err.norm() / ref.norm()).item()}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        torch.backends.cuda.matmul.allow_tf32 = False
    print("| case | mode | ms | TFLOP/s | max err/max\\|ref\\| | ‖err‖/‖ref‖ |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['mode']} | {1e3 * r['s']:.3f} | {r['tflops']:.1f} | {r['max_err']:.2e} | {r['norm_err']:.2e} |")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"torch": torch.__version__, "device": device_name(), "peer": rows}, fh, indent=1)


def autocast_bf16(fn):
    """fn run under torch.autocast to bfloat16 (its inputs stay float32)."""
    def f(*args):
        with torch.autocast(dev, dtype=torch.bfloat16):
            return fn(*args)
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", action="store_true", help="the matrix products of tilefuse peer instead of the bench workloads")
    ap.add_argument("--peer-compile", type=int, default=1, help="with --peer: also torch.compile the gelu case (TF32)")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--json")
    ap.add_argument("--workload", default="all")
    ap.add_argument("--compile-sizes", default="small,large,peer", help="sizes to run torch.compile at (it takes seconds per graph)")
    ap.add_argument("--sizes", default="small,large", help="sizes to run: small, large, peer (the workloads that have it: one size, or the row workloads' and the chain's shapes)")
    ap.add_argument("--precisions", default="fp32", help="fp32 (strict, as tilefuse's ieee dots), tf32 (TF32 products) and/or bf16 (autocast to bfloat16)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="where to run: the GPU (CUDA events) or the CPU (the wall clock around one call)")
    ap.add_argument("--threads", type=int, default=0, help="with --device cpu: torch.set_num_threads (0: PyTorch's default, the cores)")
    ap.add_argument("--device-batch", type=int, default=1, help="on the GPU, calls back to back between two events, each time their mean (tilefuse bench -device-batch); 1: events around each call")
    a = ap.parse_args()
    global dev, DEVICE_BATCH
    dev = a.device
    if a.device_batch < 1:
        sys.exit(f"--device-batch {a.device_batch}: want at least 1")
    DEVICE_BATCH = a.device_batch
    if dev == "cpu" and a.threads > 0:
        torch.set_num_threads(a.threads)
    how = "device medians (events around one call)" if dev == "cuda" else "medians (the wall clock around one call)"
    if dev == "cuda" and DEVICE_BATCH > 1:
        how = f"device medians (events {DEVICE_BATCH} calls apart, each time the mean of those calls)"
    if a.peer:
        print(f"torch {torch.__version__}, {device_name()}; {how}", file=sys.stderr)
        return peer(a)
    names = list(WORKLOADS) if a.workload == "all" else a.workload.split(",")
    rows = []
    print(f"torch {torch.__version__}, {device_name()}; {how} in ms (mlp_train and encoder_train: the wall clock of a whole step)", file=sys.stderr)
    expand = lambda n, s: peer_sizes(n) if s == "peer" else [s]
    for name, size, prec in ((n, s, p) for n in names for s0 in a.sizes.split(",") for s in expand(n, s0) for p in a.precisions.split(",")):
        if prec not in ("fp32", "tf32", "bf16"):
            sys.exit(f"precision {prec}: want fp32, tf32 or bf16")
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = prec == "tf32"
        g = torch.Generator(device=dev).manual_seed(1)
        args, ops, lib, flops = WORKLOADS[name](size, g)
        if prec == "bf16":
            ops, lib = autocast_bf16(ops), autocast_bf16(lib)
        row = {"name": name, "size": size, "precision": prec, "flops": flops}
        row["bytes"] = sum(t.numel() * t.element_size() for t in args) + args[0].numel() * args[0].element_size()
        if name == "colsum":  # the output is one row
            row["bytes"] = args[0].numel() * args[0].element_size() + args[0].shape[1] * args[0].element_size()
        timer = wall_time if name in TRAIN_STEPS else device_time
        row["timed_by"] = "wall clock" if name in TRAIN_STEPS or dev == "cpu" else "events"
        row["eager_s"] = timer(ops, args, a.runs)
        row["library_s"] = timer(lib, args, a.runs)
        if name == "softmax" and triton_softmax is not None and dev == "cuda":
            row["triton_tutorial_s"] = device_time(triton_softmax, args, a.runs)
        # the training steps read loss.item() and step the optimizer: graph
        # breaks, and a compile time that would dominate the round
        if size.split(":")[0] in a.compile_sizes.split(",") and name not in TRAIN_STEPS:
            t0 = time.time()
            c = torch.compile(ops)  # ops already under autocast for bf16
            c(*args)
            sync()
            row["compile_first_call_s"] = time.time() - t0
            row["compiled_s"] = device_time(c, args, a.runs)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    print("| workload | size | precision | eager op by op | eager library ops | torch.compile | Triton tutorial | best TFLOP/s | best TB/s | compile 1st call s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    f = lambda r, k: f"{1e3 * r[k]:.3g}" if k in r else "–"
    for r in rows:
        best = min(r[k] for k in ("eager_s", "library_s", "compiled_s", "triton_tutorial_s") if k in r)
        tf = f"{r['flops'] / best / 1e12:.1f}" if r["flops"] else "–"
        tb = f"{r['bytes'] / best / 1e12:.2f}"
        print(f"| {r['name']} | {r['size']} | {r['precision']} | {f(r, 'eager_s')} | {f(r, 'library_s')} | {f(r, 'compiled_s')} | "
              f"{f(r, 'triton_tutorial_s')} | {tf} | {tb} | {r.get('compile_first_call_s', float('nan')):.1f} |")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"torch": torch.__version__, "device": device_name(), "results": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
