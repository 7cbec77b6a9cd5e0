/* headlab head atlas explorer: static, no library, no network.
 *
 * The catalog (window.ATLAS_CATALOG, inline in index.html) lists every model of the run
 * by study; each characterised model's data is one file data/ID.js that calls
 * ATLAS_ADD(id, data) and is loaded on demand by a <script> element (file:// pages cannot
 * fetch()). Two panels show two models side by side: per site a layers x heads grid
 * coloured by the chosen criterion; a click on a head draws its attention on the example
 * sentences as a matrix (pieces) and as word-to-word arcs, with its row of the head table.
 */
(function () {
  "use strict";
  var C = window.ATLAS_CATALOG;
  var byId = {};
  C.models.forEach(function (m) { byId[m.id] = m; });
  var loaded = {}, waiting = {};
  var SVG = "http://www.w3.org/2000/svg";   // a namespace name, never fetched
  var SITE_NAMES = {enc: "encoder self-attention", dec: "decoder self-attention", cross: "cross-attention"};
  var STOPS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];  // viridis

  window.ATLAS_ADD = function (id, data) {
    loaded[id] = data;
    (waiting[id] || []).forEach(function (f) { f(data); });
    delete waiting[id];
  };

  function load(id, done) {
    if (loaded[id]) { done(loaded[id]); return; }
    if (waiting[id]) { waiting[id].push(done); return; }
    waiting[id] = [done];
    var s = document.createElement("script");
    s.src = byId[id].file;
    s.onerror = function () { document.getElementById("status").textContent = "cannot load " + byId[id].file; };
    document.head.appendChild(s);
  }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function svg(tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function colour(t) {
    if (t === null || isNaN(t)) return "rgb(221,221,221)";
    t = Math.max(0, Math.min(1, t)) * (STOPS.length - 1);
    var i = Math.min(Math.floor(t), STOPS.length - 2), f = t - i, a = STOPS[i], b = STOPS[i + 1];
    return "rgb(" + [0, 1, 2].map(function (k) { return Math.round(a[k] + f * (b[k] - a[k])); }).join(",") + ")";
  }

  function fmt(v) {
    if (v === null || v === undefined || (typeof v === "number" && isNaN(v))) return "n/a";
    if (typeof v === "number") return Math.abs(v) >= 100 || v === Math.round(v) ? String(v) : v.toPrecision(3);
    return String(v);
  }

  function criterion() { return document.getElementById("criterion").value; }

  function Panel(index) {
    this.index = index;
    this.root = document.getElementById("panel-" + index);
    this.select = this.root.querySelector("select.model");
    this.body = this.root.querySelector(".body");
    this.data = null;
    this.head = null;
    var self = this;
    this.select.addEventListener("change", function () { self.show(self.select.value); });
  }

  Panel.prototype.show = function (id) {
    var self = this;
    this.head = null;
    this.body.innerHTML = "";
    if (!id) { this.data = null; return; }
    this.body.appendChild(el("p", {"class": "loading"}, "loading " + byId[id].path + " ..."));
    load(id, function (data) {
      if (self.select.value !== id) return;
      self.data = data;
      self.draw();
    });
  };

  Panel.prototype.value = function (row, col) {
    var v = row[this.data.columns.indexOf(col)];
    return typeof v === "number" ? v : (v === true ? 1 : v === false ? 0 : null);
  };

  Panel.prototype.rowOf = function (site, layer, head) {
    var c = this.data.columns, s = c.indexOf("site"), l = c.indexOf("layer"), h = c.indexOf("head");
    return this.data.rows.find(function (r) { return r[s] === site && r[l] === layer && r[h] === head; });
  };

  Panel.prototype.draw = function () {
    var self = this, d = this.data, crit = criterion();
    this.body.innerHTML = "";
    var info = el("p", {"class": "info"});
    info.textContent = d.path + " — studies: " + d.studies.join(", ") + " — " + d.sentences +
      " validation sentences";
    this.body.appendChild(info);
    var values = d.rows.map(function (r) { return self.value(r, crit); }).filter(function (v) { return v !== null; });
    var lo = Math.min.apply(null, values), hi = Math.max.apply(null, values);
    var legend = el("div", {"class": "legend"});
    legend.appendChild(el("span", {"class": "lo"}, values.length ? fmt(lo) : "n/a"));
    legend.appendChild(el("span", {"class": "bar"}));
    legend.appendChild(el("span", {"class": "hi"}, values.length ? fmt(hi) : "n/a"));
    legend.appendChild(el("span", {"class": "what"}, C.criteria[crit] + (values.length ? "" : ": not defined for this model")));
    this.body.appendChild(legend);
    var grids = el("div", {"class": "grids"});
    ["enc", "dec", "cross"].forEach(function (site) {
      var shape = d.sites[site];
      if (!shape) return;
      var box = el("div", {"class": "site"});
      box.appendChild(el("h3", {}, SITE_NAMES[site]));
      var table = el("table", {"class": "grid", "data-site": site});
      var head = el("tr");
      head.appendChild(el("th", {}, "layer \\ head"));
      for (var h = 1; h <= shape.heads; h++) head.appendChild(el("th", {}, String(h)));
      table.appendChild(head);
      for (var l = 1; l <= shape.layers; l++) {
        var tr = el("tr");
        tr.appendChild(el("th", {}, String(l)));
        for (h = 1; h <= shape.heads; h++) {
          var row = self.rowOf(site, l, h), v = row ? self.value(row, crit) : null;
          var td = el("td", {"class": "cell", "data-site": site, "data-layer": l, "data-head": h});
          td.style.background = colour(v === null ? null : (hi > lo ? (v - lo) / (hi - lo) : 0.5));
          td.title = self.tooltip(row);
          td.textContent = row ? self.badge(row) : "";
          td.addEventListener("mouseenter", self.hover.bind(self, row));
          td.addEventListener("click", self.pick.bind(self, site, l, h));
          tr.appendChild(td);
        }
        table.appendChild(tr);
      }
      box.appendChild(table);
      grids.appendChild(box);
    });
    this.body.appendChild(grids);
    this.body.appendChild(el("p", {"class": "hover"}, "hover a head for its values, click it for its attention"));
    this.body.appendChild(el("div", {"class": "detail"}));
    if (this.head) this.pick.apply(this, this.head);
  };

  var BADGE = {"fixed pattern": "F", "learned": "", "gated": "g", "pruned": "×", "DHICM-mixed": "D"};

  Panel.prototype.badge = function (row) {
    var kind = String(row[this.data.columns.indexOf("family")]);
    return kind in BADGE ? BADGE[kind] : kind.charAt(0);
  };

  Panel.prototype.tooltip = function (row) {
    if (!row) return "";
    var d = this.data;
    return d.columns.map(function (c, i) { return c + ": " + fmt(row[i]); }).join("\n");
  };

  Panel.prototype.hover = function (row) {
    var p = this.body.querySelector(".hover");
    if (!row) return;
    var d = this.data, keep = ["site", "layer", "head", "kind", criterion()];
    p.textContent = keep.map(function (c) { return c + " " + fmt(row[d.columns.indexOf(c)]); }).join(" · ");
  };

  Panel.prototype.pick = function (site, layer, head) {
    var self = this, d = this.data, row = this.rowOf(site, layer, head);
    this.head = [site, layer, head];
    [].forEach.call(this.body.querySelectorAll("td.cell.picked"), function (c) { c.classList.remove("picked"); });
    var cell = this.body.querySelector('td.cell[data-site="' + site + '"][data-layer="' + layer + '"][data-head="' + head + '"]');
    if (cell) cell.classList.add("picked");
    var box = this.body.querySelector(".detail");
    box.innerHTML = "";
    box.appendChild(el("h3", {"class": "picked-head"}, SITE_NAMES[site] + ", layer " + layer + ", head " + head));
    var table = el("table", {"class": "headrow"});
    d.columns.forEach(function (c, i) {
      var tr = el("tr");
      tr.appendChild(el("th", {}, c));
      tr.appendChild(el("td", {}, fmt(row ? row[i] : null)));
      table.appendChild(tr);
    });
    var wrap = el("div", {"class": "detail-body"}), right = el("div", {"class": "detail-views"});
    wrap.appendChild(table);
    wrap.appendChild(right);
    box.appendChild(wrap);
    if (!d.examples.length) { right.appendChild(el("p", {}, "no example sentences")); return; }
    var choose = el("select", {"class": "sentence"});
    d.examples.forEach(function (s, i) { choose.appendChild(el("option", {value: i}, (i + 1) + ": " + s.src_words.join(" "))); });
    right.appendChild(el("label", {}, "sentence "));
    right.lastChild.appendChild(choose);
    var views = el("div", {"class": "views"});
    right.appendChild(views);
    function drawSentence() {
      var s = d.examples[+choose.value];
      views.innerHTML = "";
      var q = site === "enc" ? s.src : s.tgt, k = site === "dec" ? s.tgt : s.src;
      var qw = site === "enc" ? s.src_words : s.tgt_words, kw = site === "dec" ? s.tgt_words : s.src_words;
      views.appendChild(matrix(s.maps[site][layer - 1][head - 1], q, k));
      views.appendChild(arcs(s.word_maps[site][layer - 1][head - 1], qw, kw, site === "cross"));
    }
    choose.addEventListener("change", drawSentence);
    drawSentence();
  };

  function textWidth(tokens) { return 7 * Math.max.apply(null, tokens.map(function (t) { return t.length; }).concat([1])); }

  function matrix(att, queries, keys) {
    var cell = 16, left = textWidth(queries) + 8, top = textWidth(keys) + 8;
    var s = svg("svg", {"class": "matrix", width: left + keys.length * cell + 4, height: top + queries.length * cell + 4});
    keys.forEach(function (t, j) {
      var x = left + j * cell + cell / 2 + 4;
      s.appendChild(svg("text", {"class": "tok key", x: x, y: top - 4, transform: "rotate(-90 " + x + " " + (top - 4) + ")"}, t));
    });
    queries.forEach(function (t, i) {
      s.appendChild(svg("text", {"class": "tok query", x: left - 4, y: top + i * cell + cell - 4, "text-anchor": "end"}, t));
      keys.forEach(function (_, j) {
        var w = att[i][j];
        var r = svg("rect", {x: left + j * cell, y: top + i * cell, width: cell - 1, height: cell - 1,
          fill: "rgb(31,119,180)", "fill-opacity": Math.max(0.02, w)});
        r.appendChild(svg("title", {}, t + " → " + keys[j] + ": " + fmt(w)));
        s.appendChild(r);
      });
    });
    return s;
  }

  function arcs(att, queries, keys, cross) {
    var gap = 12, widths = function (ws) { return ws.map(function (w) { return 7 * w.length + gap; }); };
    var place = function (ws) { var x = 10, out = []; widths(ws).forEach(function (w) { out.push(x + w / 2 - gap / 2); x += w; }); return out; };
    var xq = place(queries), xk = place(keys);
    var width = Math.max(xq[xq.length - 1] || 0, xk[xk.length - 1] || 0) + 80;
    var s;
    if (cross) {
      s = svg("svg", {"class": "arcs", width: width, height: 150});
      queries.forEach(function (w, i) { s.appendChild(svg("text", {"class": "word query", x: xq[i], y: 20, "text-anchor": "middle"}, w)); });
      keys.forEach(function (w, j) { s.appendChild(svg("text", {"class": "word key", x: xk[j], y: 140, "text-anchor": "middle"}, w)); });
      att.forEach(function (row, i) {
        row.forEach(function (w, j) {
          if (w < 0.1) return;
          s.appendChild(svg("line", {x1: xq[i], y1: 26, x2: xk[j], y2: 126, stroke: "rgb(31,119,180)",
            "stroke-opacity": w, "stroke-width": 1 + 3 * w}));
        });
      });
      return s;
    }
    var drawn = [];
    att.forEach(function (row, i) { row.forEach(function (w, j) { if (w >= 0.1) drawn.push([i, j, w]); }); });
    var lift = function (a) { return Math.min(160, 14 + Math.abs(xk[a[1]] - xq[a[0]]) / 2); };
    var height = 20 + Math.max.apply(null, [24].concat(drawn.map(lift)));
    s = svg("svg", {"class": "arcs", width: width, height: height + 20});
    var defs = svg("defs"), marker = svg("marker", {id: "tip", markerWidth: 8, markerHeight: 8, refX: 7, refY: 4,
      orient: "auto", markerUnits: "userSpaceOnUse"});
    marker.appendChild(svg("path", {d: "M0,0 L8,4 L0,8 z", fill: "rgb(214,39,40)"}));
    defs.appendChild(marker);
    s.appendChild(defs);
    queries.forEach(function (w, i) { s.appendChild(svg("text", {"class": "word", x: xq[i], y: height + 12, "text-anchor": "middle"}, w)); });
    drawn.forEach(function (a) {
      var i = a[0], j = a[1], w = a[2], x1 = xq[i], x2 = xk[j], base = height - 2, up = lift(a);
      var path = i === j
        ? "M " + (x1 - 4) + " " + base + " C " + (x1 - 12) + " " + (base - 24) + " " + (x1 + 12) + " " + (base - 24) + " " + (x1 + 4) + " " + base
        : "M " + x1 + " " + base + " C " + x1 + " " + (base - up) + " " + x2 + " " + (base - up) + " " + x2 + " " + base;
      var p = svg("path", {d: path, fill: "none", stroke: "rgb(214,39,40)", "stroke-opacity": w, "stroke-width": 1 + 2 * w,
        "marker-end": "url(#tip)"});
      p.appendChild(svg("title", {}, queries[i] + " → " + keys[j] + ": " + fmt(w)));
      s.appendChild(p);
    });
    return s;
  }

  function fillSelect(select, first) {
    select.appendChild(el("option", {value: ""}, first));
    C.studies.forEach(function (study) {
      var group = el("optgroup", {label: study});
      C.models.forEach(function (m) {
        if (m.studies.indexOf(study) < 0) return;
        var o = el("option", {value: m.id}, m.label + (m.file ? "" : " (not characterised: config atlas.models)"));
        if (!m.file) o.disabled = true;
        group.appendChild(o);
      });
      select.appendChild(group);
    });
  }

  function start() {
    var crit = document.getElementById("criterion");
    Object.keys(C.criteria).forEach(function (c) { crit.appendChild(el("option", {value: c}, c)); });
    var panels = [0, 1].map(function (i) {
      var p = document.getElementById("panel-" + i);
      fillSelect(p.querySelector("select.model"), i === 0 ? "choose a model" : "choose a model to compare");
      return new Panel(i);
    });
    crit.addEventListener("change", function () { panels.forEach(function (p) { if (p.data) p.draw(); }); });
    var first = C.models.find(function (m) { return m.file; });
    if (first) { panels[0].select.value = first.id; panels[0].show(first.id); }
    document.getElementById("status").textContent = C.models.length + " models, " +
      C.models.filter(function (m) { return m.file; }).length + " characterised";
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
