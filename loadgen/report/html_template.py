"""report.html's page (a jinja2 template): the settings, the verdicts, the summary table, the
requests that did not complete (where some did not) and the figures, inline SVG: no script
and no reference to the network."""

PAGE_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>loadgen {{ kind }} report: {{ title }}</title>
<style>
  body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0;
         color: #1d232a; background: #f6f7f9; }
  main { max-width: 1360px; margin: 0 auto; padding: 20px 28px 40px; }
  h1 { font-size: 22px; margin: 8px 0 2px; word-break: break-all; }
  h2 { font-size: 17px; margin: 28px 0 10px; }
  .sub { color: #5f6b76; font-size: 13px; }
  section { background: #fff; border: 1px solid #e1e4e8; border-radius: 6px; padding: 12px 16px;
            margin-top: 14px; }
  table { border-collapse: collapse; font-size: 13px; }
  th, td { padding: 4px 10px; border-bottom: 1px solid #eceef1; text-align: left;
           vertical-align: top; }
  th { background: #f0f2f5; font-weight: 600; white-space: nowrap; }
  table.settings td:first-child { color: #5f6b76; white-space: nowrap; width: 150px; }
  table.settings td:last-child { font-family: ui-monospace, Menlo, Consolas, monospace;
                                  word-break: break-all; }
  table.summary { width: 100%; }
  table.summary td:last-child { text-align: right; font-variant-numeric: tabular-nums; }
  table.summary td.section { background: #fafbfc; font-weight: 600; color: #3b4550;
                             text-align: left; }
  .scroll { overflow-x: auto; }
  table.points td { text-align: right; font-variant-numeric: tabular-nums; white-space: pre; }
  table.points td:first-child { text-align: left; position: sticky; left: 0; background: #fff; }
  table.points th:first-child { position: sticky; left: 0; }
  table.failures td:nth-child(2) { text-align: left; white-space: normal; }
  .ci { color: #6a737d; font-size: 11px; }
  .verdict { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 13px;
             padding: 6px 10px; border-left: 4px solid #2ca02c; background: #f3faf3;
             margin: 4px 0; white-space: pre-wrap; }
  .verdict.bad { border-left-color: #d62728; background: #fdf3f3; }
  .notes li { font-size: 13px; margin: 2px 0; }
  .columns { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 14px; }
  .charts { display: grid; grid-template-columns: repeat(var(--columns), minmax(0, 1fr));
            gap: 6px 14px; }
  .charts svg { display: block; width: 100%; height: auto; }
  .charts svg text.label { transform: translateY(-15px); font-size: 11px; }
  details { border-top: 1px solid #eceef1; padding: 4px 0; }
  details > summary { cursor: pointer; font-weight: 600; font-size: 14px; padding: 6px 0; }
  @media (max-width: 1000px) { .columns, .charts { grid-template-columns: 1fr; } }
</style>
<style>{{ chart_css }}</style>
</head>
<body>
{# A table of the page: each cell's text, and below it, after a newline, its interval. #}
{% macro points_table(table, extra_class="") %}
<section class="scroll">
<table class="points{% if extra_class %} {{ extra_class }}{% endif %}">
<tr>{% for name in table.header %}<th>{{ name }}</th>{% endfor %}</tr>
{% for row in table.rows %}
<tr>{% for cell in row %}{% set parts = cell.split('\\n', 1) %}<td>{{ parts[0] }}
{%- if parts|length > 1 %}<br><span class="ci">{{ parts[1] }}</span>{% endif %}</td>
{%- endfor %}</tr>
{% endfor %}
</table>
</section>
{% endmacro %}

<main>
<h1>loadgen {{ kind }} report: {{ title }}</h1>
<div class="sub">generated {{ generated }}</div>

<h2>Verdict</h2>
<section>
{% if verdict_summary %}<div class="sub">{{ verdict_summary }}</div>{% endif %}
{% for text, ok in verdicts if not ok or not verdict_summary %}
<div class="verdict{% if not ok %} bad{% endif %}">{{ text }}</div>
{% endfor %}
{% if verdict_summary and verdicts %}
<details><summary class="sub">every run's verdict</summary>
{% for text, ok in verdicts %}
<div class="verdict{% if not ok %} bad{% endif %}">{{ text }}</div>
{% endfor %}
</details>
{% endif %}
{% if notes %}
<ul class="notes">{% for note in notes %}<li>{{ note }}</li>{% endfor %}</ul>
{% endif %}
</section>

<div class="{{ 'columns' if kind == 'run' else '' }}">
<div>
<h2>Run settings</h2>
<section>
<table class="settings">
{% for name, value in settings %}<tr><td>{{ name }}</td><td>{{ value }}</td></tr>
{% endfor %}
</table>
</section>
</div>
{% if kind == "run" %}
<div>
<h2>Summary</h2>
<section>
<table class="summary">
{% for row in summary.rows %}
{% if row|length == 1 %}
<tr><td class="section" colspan="2">{{ row[0] }}</td></tr>
{% else %}
<tr><td>{{ row[0] }}</td><td>{{ row[1] }}</td></tr>
{% endif %}
{% endfor %}
</table>
</section>
</div>
{% endif %}
</div>

{% if kind == "campaign" %}
<h2>Summary</h2>
<div class="sub">{{ summary_note }}</div>
{{ points_table(summary) }}
{% endif %}

{% if failures %}
<h2>Requests that did not complete</h2>
{% if failures_note is defined %}<div class="sub">{{ failures_note }}</div>{% endif %}
{{ points_table(failures, "failures") }}
{% endif %}
{% for title, note, table in tables|default([]) %}
<h2>{{ title }}</h2>
<div class="sub">{{ note }}</div>
{{ points_table(table) }}
{% endfor %}

{% for title, figure in figures %}
<h2>{{ title }}</h2>
<section>{{ figure }}</section>
{% endfor %}
</main>
</body>
</html>
"""
