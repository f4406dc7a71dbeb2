import importlib.util, torch, time
spec = importlib.util.spec_from_file_location("m", "../shared/kernelbench-dev/level3/48_Mamba2ReturnY.py"); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
torch.manual_seed(0)
model = m.Model(*m.get_init_inputs())
x = m.get_inputs()[0]
t = time.time()
with torch.no_grad():
    y32 = model(x)
    print("fp32", time.time() - t, flush=True)
    y64 = model.double()(x.double())
print("time", time.time() - t)
for name, y in (("fp32", y32),):
    d = (y.double() - y64).abs()
    tol = 1e-4 + 1e-4 * y64.abs()
    print(name, "max abs", d.max().item(), "outside 1e-4:", (d > tol).sum().item(), "of", d.numel())
print("output range", y64.abs().max().item(), y64.std().item())
