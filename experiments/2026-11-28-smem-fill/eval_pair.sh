# Sourced by run.sh and cluster4.sh: eval_one SOURCE M N K JSON LABEL LOG evaluates one kernel file through
# `hgemm eval` (checked, both modes, the libraries alongside) into JSON and appends a one-line summary to LOG.
eval_one() {
  python3 -P -c 'from hgemm.agent.cli import main; main()' eval "$1" "$2" "$3" "$4" --json > "$5"
  python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
line = [sys.argv[2], sys.argv[3], 'ok' if r.get('correct') else str(r.get('failure_kind'))]
for m, d in r.get('modes', {}).items():
    c = d['candidate']['median_us'] if d.get('candidate') else float('nan')
    line.append(f\"{m} {c:.2f} us (best library {min(s['median_us'] for s in d['baselines'].values()):.2f})\")
print('  '.join(line))" "$5" "$6" "$2x$3x$4" | tee -a "$7"
}
