/* headlab head atlas explorer: static, no library, no network.
 *
 * The catalog (window.ATLAS_CATALOG, inline in index.html) lists every model of the run
 * by study; each characterised model's data is one file data/ID.js that calls
 * ATLAS_ADD(id, data) and is loaded on demand by a <script> element (file:// pages cannot
 * fetch()). Two panels show two models side by side: per site a layers x heads grid
 * coloured by the chosen criterion; a click on a head draws its attention on the example
 * sentences as a matrix (pieces) and as word-to-word arcs, with its row of the head table.
 *
 * Colour scales come from the catalog, one per criterion for every model and panel
 * (report/atlas.py scales()): values are oriented (value x important) so that the more
 * important end is always the right of the legend; a signed criterion gets a diverging
 * scale around 0, a positive one spanning a decade or more a log scale; pruned heads and
 * closed gates set no end. Under the grids, the agreement view plots two criteria's ranks
 * head by head (points linked to the grid cells) with the model's Spearman rho and
 * interval and the heads the two criteria disagree on most.
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
  // blue (less important) - white (0: no effect) - red (more important)
  var DIVERGING = [[33, 102, 172], [146, 197, 222], [247, 247, 247], [244, 165, 130], [178, 24, 43]];
  var NONE = "rgb(221,221,221)";
  var SITE_COLOURS = {enc: "rgb(31,119,180)", dec: "rgb(255,127,14)", cross: "rgb(44,160,44)"};

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

  function ramp(stops, t) {
    t = Math.max(0, Math.min(1, t)) * (stops.length - 1);
    var i = Math.min(Math.floor(t), stops.length - 2), f = t - i, a = stops[i], b = stops[i + 1];
    return "rgb(" + [0, 1, 2].map(function (k) { return Math.round(a[k] + f * (b[k] - a[k])); }).join(",") + ")";
  }

  // where a value of criterion `name` sits on its shared scale: 0 (least important end)
  // to 1 (most important end), clipped; null when there is no value or no scale
  function position(name, v) {
    var c = C.criteria[name];
    if (v === null || v === undefined || isNaN(v) || !c || c.lo === null) return null;
    var u = v * (c.important || 1);
    if (!(c.hi > c.lo)) return 0.5;
    // a log scale (report/atlas.py scales(): positive ends a decade apart or more): values
    // at or below 0 take the low end
    if (c.log) return u > 0 ? Math.max(0, Math.min(1, Math.log(u / c.lo) / Math.log(c.hi / c.lo))) : 0;
    return Math.max(0, Math.min(1, (u - c.lo) / (c.hi - c.lo)));
  }

  function colour(name, v) {
    var t = position(name, v);
    if (t === null) return NONE;
    return ramp(C.criteria[name].signed ? DIVERGING : STOPS, t);
  }

  function gradient(name) {
    var stops = C.criteria[name].signed ? DIVERGING : STOPS;
    return "linear-gradient(90deg, " + stops.map(function (s) { return "rgb(" + s.join(",") + ")"; }).join(", ") + ")";
  }

  // the value at each end of the scale, in the criterion's own units
  function ends(name) {
    var c = C.criteria[name], k = c.important || 1;
    return [c.lo / k, c.hi / k];
  }

  function legend(name) {
    var c = C.criteria[name], box = el("div", {"class": "legend", "data-criterion": name});
    if (c.lo === null) {
      box.appendChild(el("span", {"class": "what"}, c.label + ": no head of any characterised model has it"));
      return box;
    }
    var e = ends(name);
    box.appendChild(el("span", {"class": "lo"}, fmt(e[0])));
    var bar = el("span", {"class": "bar"});
    bar.style.background = gradient(name);
    box.appendChild(bar);
    box.appendChild(el("span", {"class": "hi"}, fmt(e[1])));
    var toward = c.important ? "more important →: " + c.means : c.means.replace("no importance reading: ", "no importance reading; → ");
    box.appendChild(el("span", {"class": "direction"}, toward));
    box.appendChild(el("span", {"class": "what"}, c.label + (c.unit === "head index" ? " (each head index once: the encoder's \"every layer\" row)" : "") +
      ". One scale for every model and panel" + (c.signed ? ", 0 white" : "") + (c.log ? ", logarithmic" : "") +
      "; pruned heads and closed gates set no end; beyond the ends: the end's colour."));
    return box;
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
    var self = this, d = this.data, crit = criterion(), unit = C.criteria[crit].unit;
    this.body.innerHTML = "";
    var info = el("p", {"class": "info"});
    info.textContent = d.path + " — studies: " + d.studies.join(", ") + " — " + d.sentences +
      " validation sentences";
    this.body.appendChild(info);
    var defined = d.rows.some(function (r) { return self.value(r, crit) !== null; });
    this.body.appendChild(el("p", {"class": "defined"}, defined ? "" : crit + ": not defined for this model"));
    if (defined) this.body.appendChild(this.topHeads(crit));
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
      // a per-head-index criterion (ΔBLEU: head k disabled in every layer) is one row of
      // its own, the layers' cells left uncoloured: the value belongs to no single layer
      var perIndex = unit === "head index";
      if (perIndex && site === "enc") {
        var all = el("tr", {"class": "every-layer"});
        all.appendChild(el("th", {}, "every layer"));
        for (h = 1; h <= shape.heads; h++) {
          var first = self.rowOf(site, 1, h), v0 = first ? self.value(first, crit) : null;
          var unitCell = el("td", {"class": "cell unit", "data-site": site, "data-layer": "all", "data-head": h});
          unitCell.style.background = colour(crit, v0);
          unitCell.title = crit + " of head " + h + " disabled in every encoder layer: " + fmt(v0);
          unitCell.addEventListener("mouseenter", self.link.bind(self, site, "all", h, true));
          unitCell.addEventListener("mouseleave", self.link.bind(self, site, "all", h, false));
          all.appendChild(unitCell);
        }
        table.appendChild(all);
      }
      for (var l = 1; l <= shape.layers; l++) {
        var tr = el("tr");
        tr.appendChild(el("th", {}, String(l)));
        for (h = 1; h <= shape.heads; h++) {
          var row = self.rowOf(site, l, h), v = row && !perIndex ? self.value(row, crit) : null;
          var td = el("td", {"class": "cell", "data-site": site, "data-layer": l, "data-head": h});
          td.style.background = colour(crit, v);
          td.title = self.tooltip(row);
          td.textContent = row ? self.badge(row) : "";
          td.addEventListener("mouseenter", self.hover.bind(self, row));
          td.addEventListener("mouseenter", self.link.bind(self, site, l, h, true));
          td.addEventListener("mouseleave", self.link.bind(self, site, l, h, false));
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
    this.body.appendChild(this.agreementView());
    this.body.appendChild(el("div", {"class": "detail"}));
    if (this.head) this.pick.apply(this, this.head);
  };

  // the model's five most important heads by the criterion (largest, where it has no
  // importance reading), each linked to its cell
  Panel.prototype.topHeads = function (crit) {
    var self = this, c = C.criteria[crit], k = c.important || 1;
    var units = this.units(crit, crit).sort(function (p, q) { return q.a * k - p.a * k; }).slice(0, 5);
    var line = el("p", {"class": "top"}, (c.important ? "most important by " : "largest ") + crit + ": ");
    units.forEach(function (u, i) {
      var item = el("span", {"class": "top-head", "data-site": u.site, "data-layer": u.layer, "data-head": u.head},
        unitName(u) + " " + fmt(u.a));
      item.addEventListener("mouseenter", self.link.bind(self, u.site, u.layer, u.head, true));
      item.addEventListener("mouseleave", self.link.bind(self, u.site, u.layer, u.head, false));
      if (u.layer !== "all") item.addEventListener("click", self.pick.bind(self, u.site, u.layer, u.head));
      if (i) line.appendChild(document.createTextNode(" · "));
      line.appendChild(item);
    });
    return line;
  };

  // -- agreement view -----------------------------------------------------------------

  Panel.prototype.available = function () {
    var self = this, d = this.data;
    return Object.keys(C.criteria).filter(function (c) {
      return d.columns.indexOf(c) >= 0 && d.rows.some(function (r) { return self.value(r, c) !== null; });
    });
  };

  // one point per unit with both criteria: a head, or a head index (encoder, every layer)
  // when either criterion is per head index, the other averaged over the layers (as
  // headlab.atlas.agree.units does for the statistics)
  Panel.prototype.units = function (a, b) {
    var self = this, d = this.data, c = d.columns;
    var pruned = c.indexOf("pruned"), site = c.indexOf("site"), layer = c.indexOf("layer"), head = c.indexOf("head");
    var rows = d.rows.filter(function (r) { return r[pruned] !== true; });
    var perIndex = [a, b].filter(function (k) { return C.criteria[k].unit === "head index"; });
    if (!perIndex.length) {
      return rows.map(function (r) {
        return {site: r[site], layer: r[layer], head: r[head], a: self.value(r, a), b: self.value(r, b)};
      }).filter(function (u) { return u.a !== null && u.b !== null; });
    }
    var byHead = {};
    rows.forEach(function (r) {
      if (r[site] !== "enc") return;
      var u = byHead[r[head]] = byHead[r[head]] || {site: "enc", layer: "all", head: r[head], sums: {}, counts: {}};
      [a, b].forEach(function (k) {
        var v = self.value(r, k);
        if (v === null) return;
        if (perIndex.indexOf(k) >= 0) { u.sums[k] = v; u.counts[k] = 1; return; }
        u.sums[k] = (u.sums[k] || 0) + v;
        u.counts[k] = (u.counts[k] || 0) + 1;
      });
    });
    return Object.keys(byHead).map(function (h) {
      var u = byHead[h];
      return {site: u.site, layer: u.layer, head: u.head, a: u.counts[a] ? u.sums[a] / u.counts[a] : null,
              b: u.counts[b] ? u.sums[b] / u.counts[b] : null};
    }).filter(function (u) { return u.a !== null && u.b !== null; });
  };

  // oriented rank of each value in (0, 1]: ties share their mean rank, more important higher
  function ranks(values, name) {
    var k = C.criteria[name].important || 1;
    var order = values.map(function (v, i) { return [v * k, i]; }).sort(function (x, y) { return x[0] - y[0]; });
    var out = new Array(values.length), i = 0;
    while (i < order.length) {
      var j = i;
      while (j + 1 < order.length && order[j + 1][0] === order[i][0]) j++;
      for (var m = i; m <= j; m++) out[order[m][1]] = ((i + j) / 2 + 1) / values.length;
      i = j + 1;
    }
    return out;
  }

  function unitName(u) {
    return u.site + (u.layer === "all" ? " every layer" : " L" + u.layer) + " H" + u.head;
  }

  Panel.prototype.agreementView = function () {
    var self = this, names = this.available(), box = el("div", {"class": "agreement"});
    box.appendChild(el("h3", {}, "agreement of two criteria, head by head"));
    if (names.length < 2) { box.appendChild(el("p", {}, "fewer than two criteria defined for this model")); return box; }
    var pick = function (cls, preferred, other) {
      var s = el("select", {"class": cls});
      names.forEach(function (n) { s.appendChild(el("option", {value: n}, n)); });
      s.value = names.indexOf(preferred) >= 0 && preferred !== other ? preferred : names.filter(function (n) { return n !== other; })[0];
      return s;
    };
    this.agree = this.agree || ["grad_raw", "loss_delta"];
    var x = pick("agree-x", this.agree[0], null), y = pick("agree-y", this.agree[1], x.value);
    var bar = el("p", {"class": "choose"});
    bar.appendChild(el("label", {}, "x "));
    bar.lastChild.appendChild(x);
    bar.appendChild(el("label", {}, " y "));
    bar.lastChild.appendChild(y);
    box.appendChild(bar);
    var plot = el("div", {"class": "agree-body"});
    box.appendChild(plot);
    var redraw = function () { self.agree = [x.value, y.value]; self.drawAgreement(plot, x.value, y.value); };
    x.addEventListener("change", redraw);
    y.addEventListener("change", redraw);
    redraw();
    return box;
  };

  Panel.prototype.pairStats = function (a, b) {
    var found = (this.data.pairs || []).find(function (p) { return (p.a === a && p.b === b) || (p.a === b && p.b === a); });
    var pooled = (C.agreement || []).find(function (p) { return (p.a === a && p.b === b) || (p.a === b && p.b === a); });
    return [found, pooled];
  };

  Panel.prototype.drawAgreement = function (plot, a, b) {
    var self = this;
    // a point removed under a still pointer (the criteria changed from the keyboard) gets
    // no mouseleave: drop every outline it set, in the grids and the top-heads line too
    [].forEach.call(this.body.querySelectorAll(".linked"), function (e) { e.classList.remove("linked"); });
    plot.innerHTML = "";
    var units = this.units(a, b);
    var stats = this.pairStats(a, b), mine = stats[0], pooled = stats[1];
    var text = function (p, where) {
      return "Spearman ρ = " + fmt(p.rho) + " [" + fmt(p.low) + ", " + fmt(p.high) + "] (95% bootstrap) over " + p.n +
        " " + (p.units === "head index" ? "head indices" : "heads") + where;
    };
    plot.appendChild(el("p", {"class": "rho"}, mine ? text(mine, " of this model") :
      "ρ not given: fewer than 8 " + (units.length && units[0].layer === "all" ? "head indices" : "heads") +
      " with both criteria, or one is constant (" + units.length + ")"));
    if (pooled) plot.appendChild(el("p", {"class": "rho-all"}, text(pooled, " of all " + pooled.models + " atlas models")));
    if (!units.length) return;
    var ra = ranks(units.map(function (u) { return u.a; }), a), rb = ranks(units.map(function (u) { return u.b; }), b);
    var size = 220, pad = 34, s = svg("svg", {"class": "scatter", width: size + pad + 10, height: size + pad + 10});
    s.appendChild(svg("rect", {x: pad, y: 6, width: size, height: size, fill: "none", stroke: "#bbb"}));
    s.appendChild(svg("line", {x1: pad, y1: 6 + size, x2: pad + size, y2: 6, stroke: "#ddd"}));
    s.appendChild(svg("text", {x: pad + size / 2, y: size + 24, "text-anchor": "middle"}, a + " rank, more important →"));
    s.appendChild(svg("text", {x: 10, y: 6 + size / 2, "text-anchor": "middle", transform: "rotate(-90 10 " + (6 + size / 2) + ")"},
      b + " rank →"));
    units.forEach(function (u, i) {
      var dot = svg("circle", {"class": "point", cx: pad + ra[i] * size, cy: 6 + size - rb[i] * size, r: 4,
        fill: SITE_COLOURS[u.site], "data-site": u.site, "data-layer": u.layer, "data-head": u.head});
      dot.appendChild(svg("title", {}, unitName(u) + ": " + a + " " + fmt(u.a) + ", " + b + " " + fmt(u.b)));
      dot.addEventListener("mouseenter", self.link.bind(self, u.site, u.layer, u.head, true));
      dot.addEventListener("mouseleave", self.link.bind(self, u.site, u.layer, u.head, false));
      if (u.layer !== "all") dot.addEventListener("click", self.pick.bind(self, u.site, u.layer, u.head));
      s.appendChild(dot);
    });
    var key = el("p", {"class": "sites"});
    Object.keys(SITE_COLOURS).forEach(function (site) {
      if (!units.some(function (u) { return u.site === site; })) return;
      var sw = el("span", {"class": "swatch"});
      sw.style.background = SITE_COLOURS[site];
      key.appendChild(sw);
      key.appendChild(document.createTextNode(" " + SITE_NAMES[site] + " "));
    });
    var wrap = el("div", {"class": "agree-plot"});
    wrap.appendChild(s);
    var side = el("div", {"class": "disagree"});
    side.appendChild(key);
    side.appendChild(el("p", {}, "most disagreement (|rank difference|; diagonal: agreement):"));
    var list = el("ol", {"class": "disagree"});
    units.map(function (u, i) { return [Math.abs(ra[i] - rb[i]), u, ra[i], rb[i]]; })
      .sort(function (p, q) { return q[0] - p[0]; }).slice(0, 6).forEach(function (p) {
        var u = p[1], item = el("li", {"data-site": u.site, "data-layer": u.layer, "data-head": u.head},
          unitName(u) + ": " + a + " rank " + Math.round(100 * p[2]) + "%, " + b + " rank " + Math.round(100 * p[3]) + "%");
        item.addEventListener("mouseenter", self.link.bind(self, u.site, u.layer, u.head, true));
        item.addEventListener("mouseleave", self.link.bind(self, u.site, u.layer, u.head, false));
        if (u.layer !== "all") item.addEventListener("click", self.pick.bind(self, u.site, u.layer, u.head));
        list.appendChild(item);
      });
    side.appendChild(list);
    wrap.appendChild(side);
    plot.appendChild(wrap);
  };

  // highlight a head's (or a head index's) grid cells, point and list entry together
  Panel.prototype.link = function (site, layer, head, on) {
    var sel = '[data-site="' + site + '"][data-head="' + head + '"]';
    [].forEach.call(this.body.querySelectorAll(".cell" + sel + ", .point" + sel + ", li" + sel + ", .top-head" + sel), function (e) {
      var l = e.getAttribute("data-layer");
      if (layer === "all" || l === "all" || l === String(layer)) e.classList.toggle("linked", on);
    });
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

  // a weight's opacity in the matrix: the weight itself, a faint floor so the cell shows
  function opacity(w) { return Math.max(0.02, w); }

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
          fill: "rgb(31,119,180)", "fill-opacity": opacity(w)});
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

  function claims() {
    var box = document.getElementById("claims");
    if (!C.claims || !C.claims.length) { box.appendChild(el("p", {}, "no claim tested")); return; }
    var table = el("table", {"class": "claims"}), head = el("tr");
    ["claim", "paper", "compares", "over", "expected", "ρ [95% interval]", "verdict"].forEach(function (h) { head.appendChild(el("th", {}, h)); });
    table.appendChild(head);
    C.claims.forEach(function (c) {
      var tr = el("tr", {"class": c.verdict.replace(" ", "-")});
      [c.claim, c.paper, c.a + " ~ " + c.b + ": " + c.compares, c.rows + " (" + c.n + " " + (c.units === "head index" ? "head indices" : "heads") + ", " + c.models + " models)",
       c.expected, c.rho === null ? "n/a" : fmt(c.rho) + " [" + fmt(c.low) + ", " + fmt(c.high) + "]", c.verdict]
        .forEach(function (v) { tr.appendChild(el("td", {}, String(v))); });
      table.appendChild(tr);
    });
    box.appendChild(table);
  }

  function start() {
    var crit = document.getElementById("criterion");
    Object.keys(C.criteria).forEach(function (c) { crit.appendChild(el("option", {value: c}, c)); });
    // the loss change first: the criterion every head of every model has, with a sign
    if (C.criteria.loss_delta) crit.value = "loss_delta";
    var panels = [0, 1].map(function (i) {
      var p = document.getElementById("panel-" + i);
      fillSelect(p.querySelector("select.model"), i === 0 ? "choose a model" : "choose a model to compare");
      return new Panel(i);
    });
    var showLegend = function () {
      var box = document.getElementById("legend");
      box.innerHTML = "";
      box.appendChild(legend(crit.value));
    };
    crit.addEventListener("change", function () { showLegend(); panels.forEach(function (p) { if (p.data) p.draw(); }); });
    showLegend();
    claims();
    var first = C.models.find(function (m) { return m.file; });
    if (first) { panels[0].select.value = first.id; panels[0].show(first.id); }
    document.getElementById("status").textContent = C.models.length + " models, " +
      C.models.filter(function (m) { return m.file; }).length + " characterised";
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
