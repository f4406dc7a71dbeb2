"""Per-problem speedup over torch.compile of one suite run against earlier ones, as a Markdown table.

    python3 benchmarks/compare_speedups.py NEW.jsonl[,MORE.jsonl] "LABEL=OLD/results.jsonl" ...

A speedup is the torch.compile median over the candidate median of a ``status == correct`` row; the geomeans
are over the problems verified in both runs.
"""
import json, math, sys
def load(p):
    out={}
    for line in open(p):
        r=json.loads(line); b=(r.get('result') or {}).get('benchmark') or {}
        c=b.get('candidate',{}).get('median_ms'); k=b.get('compiled',{}).get('median_ms')
        out[r['key']]=(r['status'], k/c if (r['status']=='correct' and c and k) else None, c, k)
    return out
new={}
for p in sys.argv[1].split(','): new.update(load(p))
olds=[(name,load(p)) for name,p in (a.split('=') for a in sys.argv[2:])]
print("| problem | status | vs compile (ms ours / compile) |"+"".join(f" {n} |" for n,_ in olds))
print("|---|---|---|"+"---|"*len(olds))
logs={n:[] for n,_ in olds}; lognew={n:[] for n,_ in olds}
for key in sorted(new, key=lambda k:(k.split('/')[0], int(k.split('/')[1].split('_')[0]))):
    s,sp,c,k=new[key]
    row=f"| {key} | {s} | "+(f"{sp:.2f}x ({c:.3f} / {k:.3f})" if sp else "-")+" |"
    for n,o in olds:
        os_=o.get(key); row+=f" {os_[1]:.2f}x |" if os_ and os_[1] else (f" {os_[0]} |" if os_ else " - |")
        if os_ and os_[1] and sp: logs[n].append(math.log(os_[1])); lognew[n].append(math.log(sp))
    print(row)
for n,_ in olds:
    if logs[n]: print(f"\nin common with {n} (both verified): {len(logs[n])}: now {math.exp(sum(lognew[n])/len(lognew[n])):.3f}x, then {math.exp(sum(logs[n])/len(logs[n])):.3f}x")
v=[sp for s,sp,_,_ in new.values() if sp]
print(f"\nverified {len(v)} of {len(new)}; geomean vs compile over verified {math.exp(sum(map(math.log,v))/len(v)):.3f}x")
