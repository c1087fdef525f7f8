"""The report page's Jinja template (``TEMPLATE``), filled by ``app.report.html.render_html``."""

#: The report page: its parts, tables and figures filled from the report's document.
TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tealeaves imbalance report · {{ d.range.start_utc }} UTC</title>
<style>
body { font-family: Inter, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif; color: #1f2937;
  margin: 0 auto; padding: 18px; max-width: {{ '740px' if print_layout else '1180px' }};
  font-size: 13px; }
h1 { font-size: 20px; margin: 0 0 2px; } h2 { font-size: 15px; margin: 18px 0 6px;
  border-bottom: 1px solid #e5e7eb; padding-bottom: 3px; break-after: avoid; }
.muted { color: #6b7280; } .cards { display: flex; flex-wrap: wrap; gap: 8px; margin: 10px 0; }
.card { border: 1px solid #e5e7eb; border-radius: 6px; padding: 6px 10px; min-width: 120px;
  flex: 1 1 120px; break-inside: avoid; }
.card .k { font-size: 11px; text-transform: uppercase; color: #6b7280; letter-spacing: .03em; }
.card .v { font-size: 18px; font-weight: 700; } .card .s { font-size: 11px; color: #6b7280; }
table { border-collapse: collapse; width: 100%; margin: 4px 0 8px; font-size: 12px;
  break-inside: auto; }
th, td { border-bottom: 1px solid #eef0f3; padding: 3px 6px; text-align: right; }
th { background: #f9fafb; font-weight: 600; } td:first-child, th:first-child { text-align: left; }
tr { break-inside: avoid; } .hot { color: {{ hot }}; font-weight: 700; }
.fig { break-inside: avoid; margin: 4px 0 10px; }
.kv td, .kv td:first-child { text-align: left; } .kv td:first-child { width: 30%;
  color: #4b5563; }
.note { background: #fffbeb; border: 1px solid #fde68a; border-radius: 6px; padding: 6px 10px; }
code { font-size: 11px; word-break: break-all; }
@page { size: A4; margin: 12mm; }
</style>
<script type="text/javascript">{{ plotlyjs }}</script>
</head><body>
<h1>tealeaves imbalance report</h1>
<div class="muted">{{ d.range.start_utc }} – {{ d.range.end_utc }} UTC · {{ span }} ·
{{ d.gpus|length }} GPU{{ '' if d.gpus|length == 1 else 's' }}{% if names %} ({{ names }}){% endif %}
· made {{ d.generated_utc }}</div>

<h2>Summary</h2>
<div class="cards">
{% for c in cards %}<div class="card"><div class="k">{{ c[0] }}</div><div class="v">{{ c[1] }}</div>
<div class="s">{{ c[2] }}</div></div>{% endfor %}
</div>
<p>{{ verdict }}</p>
{% if shares_text %}<p>{{ shares_text }}</p>{% endif %}
{% if d.summary.evidence %}<p>Left out of the verdicts:</p><ul>{% for line in d.summary.evidence %}
<li>{{ line }}</li>{% endfor %}</ul>{% endif %}
{% if d.groups %}<p><b>Serving groups</b>: {{ d.groups.line }}.</p>{% endif %}
{% if why %}<p><b>Why, per hot GPU</b> <span class="muted">(the ceiling each hot GPU leans on
next to the others, over the imbalanced windows it was hot in)</span>:</p>
<ul class="why">{% for line in why %}<li>{{ line }}</li>{% endfor %}</ul>{% endif %}

<h2>Timeline</h2>
<div class="muted">Phase of each {{ d.summary.window_s }}-s window (stacked shares of time where
windows are grouped or carry calibrated shares; red: imbalanced decode windows), then each GPU's
load (SM active %, else DCGM's GR engine active, else NVML utilization) as a heatmap.</div>
<div class="fig">{{ fig_timeline }}</div>

<h2>Per GPU</h2>
<table><thead><tr><th>GPU</th><th>name</th><th>busy</th><th>load</th><th>SM</th><th>tensor</th>
<th>DRAM</th><th>PCIe tx / rx<br>MB/s</th><th>NVLink tx / rx<br>MB/s</th><th>power<br>W</th>
<th>hot<br>s</th></tr></thead><tbody>
{% for g in gpu_rows %}<tr{% if g.hot %} class="hot"{% endif %}><td>{{ g.gpu }}</td><td>{{ g.name }}</td>
<td>{{ g.busy }}</td><td>{{ g.load }}</td><td>{{ g.sm }}</td><td>{{ g.tensor }}</td><td>{{ g.dram }}</td>
<td>{{ g.pcie }}</td><td>{{ g.nvlink }}</td><td>{{ g.power }}</td><td>{{ g.hot_s }}</td></tr>
{% endfor %}</tbody></table>
<div class="fig">{{ fig_gpus }}</div>
{% if d.mig_balance %}
<h2>MIG instances</h2>
<div class="muted">Each GPU instance's load (SM active, else GR engine active: a share of its own
slices) against the other instances of its GPU; a window is flagged when the busiest exceeds the
idlest by 20 points and the mean by 15 %.</div>
<ul>{% for m in d.mig_balance %}<li{% if m.uneven %} class="hot"{% endif %}>{{ m.line }}</li>
{% endfor %}</ul>
{% endif %}
{% if d.screenshots %}
<h2>Screenshots</h2>
<div class="muted">Read from each picture alone (OCR); a value under 80 % sure is marked "?".</div>
{% for p in d.screenshots %}<h3>{{ p.file }}: {{ p.tool or "no GPU monitor recognised" }}</h3>
{% if p.capture_ts is not none %}<div class="muted">taken {{ utc(p.capture_ts) }} UTC</div>{% endif %}
{% if p.gpus %}<table><thead><tr><th>GPU</th><th>utilization (%)</th><th>power (W)</th>
<th>limit (W)</th><th>memory used (MiB)</th><th>temperature (°C)</th></tr></thead><tbody>
{% for g in p.gpus %}<tr><td>{{ g.gpu }}</td>{% for k in ["util_pct", "power_w", "power_limit_w", "mem_used_mib", "temp_c"] %}<td>{% if g["values"][k] is not none %}{{ "%g"|format(g["values"][k]) }}{% if g.confidence[k] < 0.8 %} ?{% endif %}{% else %}—{% endif %}</td>{% endfor %}</tr>
{% endfor %}</tbody></table>{% endif %}
<ul>{% for r in p.regions %}{% if r.text %}<li{% if r.pattern == "uneven" %} class="hot"{% endif %}>picture, {{ r.name }} · GPUs {{ r.gpus|join(", ") }}: {{ r.text }}</li>{% endif %}
{% endfor %}{% if p.telemetry %}<li{% if p.telemetry.disagreement %} class="hot"{% endif %}>telemetry of that moment ({{ p.telemetry.windows }} windows within 5 s): {{ p.telemetry.text }}{% if p.telemetry.disagreement %}: {{ p.telemetry.disagreement }}{% endif %}</li>
{% endif %}{% for n in p.notes %}<li class="muted">{{ n }}</li>{% endfor %}</ul>
{% if p.limits %}<div class="muted">{{ p.limits }}</div>{% endif %}
{% endfor %}{% endif %}

<h2>Most imbalanced decode windows</h2>
{% if d.top_windows %}
<table><thead><tr><th>#</th><th>start (UTC)</th><th>max/mean</th><th>straggler tax</th>
<th>hot set</th><th>most loaded</th><th>idle / prefill / decode<br>share of time</th>
<th>verdict</th></tr></thead><tbody>
{% for w in top_rows %}<tr><td>{{ w.rank }}</td><td>{{ w.start }}</td><td>{{ w.ratio }}</td>
<td>{{ w.tax }}</td><td>{{ w.hot }}</td><td>{{ w.top }}</td><td>{{ w.shares }}</td>
<td>{{ w.verdict }}</td></tr>{% endfor %}
</tbody></table>
{% else %}<p class="muted">No decode windows with a defined imbalance in this range.</p>{% endif %}

{% if d.server %}
<h2>Server</h2>
<table class="kv"><tbody>{% for k, v in server_rows %}<tr><td>{{ k }}</td><td>{{ v }}</td></tr>{% endfor %}
</tbody></table>
{% endif %}

{% if d.server_ranks %}
<h2>Server DP ranks</h2>
<div class="muted">{{ rank_source }}: each rank's means over the scrapes; a rank more than 20 %
from the ranks' median generation throughput is marked.</div>
<table><thead><tr><th>{{ d.server_ranks.rank_label }}</th><th>gen tok/s</th><th>running</th>
<th>queued</th><th>accept len</th><th>× mean</th></tr></thead><tbody>
{% for r in rank_rows %}<tr{% if r.hot %} class="hot"{% endif %}><td>{{ r.rank }}</td>
<td>{{ r.gen }}</td><td>{{ r.run }}</td><td>{{ r.queue }}</td><td>{{ r.accept }}</td>
<td>{{ r.vs }}</td></tr>{% endfor %}</tbody></table>
<p>{{ d.server_ranks.line }}</p>
{% endif %}

{% if d.expert_balance %}
<h2>Expert balance (SGLang eplb metrics{{ '' if d.experts else '; no expert dump given' }})</h2>
<div class="muted">{{ eplb_source }}</div>
<p>{{ eplb_verdict }} (of the GPU ranks' summed expert selections).{{ eplb_own }}</p>
<div class="fig">{{ fig_eplb }}</div>
{% endif %}

{% if d.labels %}
<h2>Against the ground-truth labels</h2>
<table class="kv"><tbody>{% for k, v in label_rows %}<tr><td>{{ k }}</td><td>{{ v }}</td></tr>{% endfor %}
</tbody></table>
{% endif %}

{% if d.experts %}
<h2>Experts</h2>
<div class="muted">{{ d.experts.file }}: {{ d.experts.passes }} passes × {{ d.experts.layers }}
layers × {{ d.experts.experts }} experts, {{ tokens }} routed tokens; layout {{ d.experts.n_gpus }}
GPUs, EP {{ d.experts.ep_size }}{{ ' (pure TP)' if d.experts.pure_tp else '' }}.</div>
<div class="cards">
{% for c in expert_cards %}<div class="card"><div class="k">{{ c[0] }}</div><div class="v">{{ c[1] }}</div>
<div class="s">{{ c[2] }}</div></div>{% endfor %}
</div>
<table><thead><tr><th>GPU</th><th>experts held</th><th>share of expert work now</th>
</tr></thead><tbody>{% for r in expert_map %}<tr{% if r.hot %} class="hot"{% endif %}>
<td>{{ r.gpu }}</td><td>{{ r.held }}</td><td>{{ r.share }}</td></tr>{% endfor %}</tbody></table>
<div class="fig">{{ fig_experts }}</div>
<div class="fig">{{ fig_expert_layers }}</div>
<p class="note">{{ d.experts.estimate_note }}</p>
{% endif %}

<h2>Provenance</h2>
<table class="kv"><tbody>{% for k, v in prov_rows %}<tr><td>{{ k }}</td><td>{{ v }}</td></tr>{% endfor %}
</tbody></table>
<div class="muted">Definitions: balancedness = mean/max of the GPUs' work (tensor + DRAM
activity where every GPU reads both), imbalance ratio = max/mean, straggler tax = 1 − mean/max
of the GPUs' busy time (the share of GPU-time spent waiting for the slowest rank); means over the
same decode windows, those with load (an idle window, under {{ idle_load }} % mean load, has none).
The hot set: every GPU whose work exceeds the fair share in an imbalanced window; its shares are of
the summed work; it stays when one set holds {{ stays }} of the imbalanced windows, else it
rotates. Schema version
{{ d.schema_version }} (docs/report-schema.md).</div>
</body></html>
"""
