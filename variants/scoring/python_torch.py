"""The scoring operation in PyTorch, as a PyTorch user writes it: eager (one kernel per operator, a rows x features
temporary per step, the row score by torch.mv through cuBLAS) and the same function through torch.compile (Inductor
fuses it into Triton kernels; compiled at the first call, the gate's run, so the timed calls are the compiled
ones). Semantics as kstudy's: torch.clamp keeps NaN, so NaN in x gives a NaN score and flag 0."""

from kstudy_py.rungs import rung


def _scoring(torch):
    def run(x, mean, inv_std, weight, clip, threshold):
        if x.shape[1] != mean.shape[0]:  # a pitch wider than the features is padding
            x = x[:, :mean.shape[0]]
        z = torch.clamp((x - mean) * inv_std, -clip, clip)
        score = torch.mv(z, weight)
        flag = score > threshold
        return score, flag.to(torch.uint8), torch.count_nonzero(flag)

    return run


@rung(operation="scoring", framework="torch", fusion="none", kernels=6,
      description="PyTorch eager: sub, mul, clamp as tensor ops, the row score by torch.mv (cuBLAS), compare, count")
def scoring_torch(torch):
    return _scoring(torch)


@rung(operation="scoring", framework="torch", family="torch_compile", fusion="full", kernels=2,
      description="torch.compile (Inductor, default mode) of the eager function: fused Triton kernels, compiled at "
                  "the gate's run")
def scoring_torch_compile(torch):
    return torch.compile(_scoring(torch), dynamic=False)
