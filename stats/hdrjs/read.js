// Reads histograms with hdr-histogram-js and prints what it finds as JSON.
// stdin: {"hists": ["HISTF..."], "hlog": "path", "percentiles": [50, 99]}
"use strict";
const fs = require("fs");
const hdr = require("hdr-histogram-js");

function summarise(h) {
  return {
    count: h.totalCount,
    min: h.minNonZeroValue === Number.MAX_SAFE_INTEGER ? 0 : h.minNonZeroValue,
    max: h.maxValue,
    start_ms: Math.round(h.startTimeStampMsec || 0),
    end_ms: Math.round(h.endTimeStampMsec || 0),
    values: input.percentiles.map((p) => h.getValueAtPercentile(p)),
  };
}

const input = JSON.parse(fs.readFileSync(0, "utf8"));
const out = { hists: [], hlog: [] };
for (const b64 of input.hists || []) {
  out.hists.push(summarise(hdr.decodeFromCompressedBase64(b64, 64, false)));
}
if (input.hlog) {
  const reader = new hdr.HistogramLogReader(fs.readFileSync(input.hlog, "utf8"), 64, false);
  let h;
  while ((h = reader.nextIntervalHistogram()) !== null) out.hlog.push(summarise(h));
  out.start_time_sec = reader.startTimeSec;
}
process.stdout.write(JSON.stringify(out));
