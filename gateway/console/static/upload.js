// The new-link page's upload: the file goes to the gateway over tus
// (tus-js-client, vendored beside this file) at /console/uploads/, with
// the console session's cookie, and resumes where it stopped when the
// connection drops. When it is done the form's object fields name the
// stored version, and the link can be made.
"use strict";
(function () {
  var fileInput = document.getElementById("upload-file");
  var keyInput = document.getElementById("upload-key");
  var start = document.getElementById("upload-start");
  if (!fileInput || !start || !window.tus) {
    return;
  }
  var box = document.getElementById("upload-progress");
  var bar = document.getElementById("upload-bar");
  var status = document.getElementById("upload-status");

  function size(n) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB"];
    var i = 0;
    while (n >= 1024 && i < units.length - 1) {
      n /= 1024;
      i++;
    }
    return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
  }
  function duration(s) {
    if (!isFinite(s)) {
      return "…";
    }
    if (s < 1) {
      return "under a second";
    }
    s = Math.round(s);
    if (s < 60) {
      return s + " s";
    }
    if (s < 3600) {
      return Math.floor(s / 60) + " min " + (s % 60) + " s";
    }
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }

  fileInput.addEventListener("change", function () {
    var f = fileInput.files[0];
    if (f && !keyInput.value) {
      keyInput.value = "uploads/" + f.name;
    }
  });

  start.addEventListener("click", function () {
    var file = fileInput.files[0];
    if (!file) {
      status.textContent = "Choose a file first.";
      box.hidden = false;
      return;
    }
    var key = keyInput.value || "uploads/" + file.name;
    keyInput.value = key;
    start.disabled = true;
    box.hidden = false;
    bar.value = 0;
    bar.max = Math.max(file.size, 1);
    // The rate is over the last few seconds up to now, not up to the last
    // progress event: a ticker redraws the line every second, so when the
    // bytes stop moving the rate falls towards zero instead of staying as
    // it was, and after a few seconds without a byte the line says the
    // upload is stalled, with no time left it cannot know.
    var WINDOW = 5000, STALL = 3000;
    var samples = []; // [time, bytes sent], the oldest at or before the window's start
    var sent = 0, total = file.size, moved = Date.now(), resumed = 0, note = "";
    function draw(now) {
      while (samples.length > 1 && now - samples[1][0] >= WINDOW) {
        samples.shift();
      }
      var parts = [size(sent) + " of " + size(total)];
      var still = now - moved;
      if (still >= STALL) {
        parts.push("stalled for " + duration(still / 1000) + ", no byte moving");
      } else {
        var first = samples.length ? samples[0] : [now, sent];
        var span = (now - first[0]) / 1000;
        var rate = span > 0 ? Math.max(sent - first[1], 0) / span : 0;
        parts.push(size(Math.round(rate)) + "/s");
        parts.push(duration(rate > 0 ? (total - sent) / rate : Infinity) + " left");
      }
      if (note) {
        parts.push(note);
      } else if (resumed) {
        parts.push("resumed");
      }
      status.textContent = parts.join(" · ");
    }
    var ticker = setInterval(function () {
      draw(Date.now());
    }, 1000);
    function stop() {
      clearInterval(ticker);
    }
    var upload = new tus.Upload(file, {
      endpoint: "/console/uploads/",
      metadata: { key: key, filename: file.name, content_type: file.type || "application/octet-stream" },
      // Chunks of 16 MiB: a connection cut mid-chunk costs at most that.
      chunkSize: 16 * 1024 * 1024,
      retryDelays: [0, 1000, 2000, 4000, 8000, 15000, 30000],
      removeFingerprintOnSuccess: true,
      onShouldRetry: function (err, attempt) {
        resumed = attempt + 1;
        note = "connection lost, resuming (attempt " + resumed + ")";
        draw(Date.now());
        var code = err.originalResponse ? err.originalResponse.getStatus() : 0;
        return code === 0 || code === 409 || code === 423 || code >= 500;
      },
      onProgress: function (bytes, all) {
        var now = Date.now();
        if (bytes < sent) {
          // Resumed from the server's offset, behind what was handed
          // to the connection that dropped: the rate starts again.
          samples = [];
        }
        if (bytes !== sent) {
          moved = now;
          note = "";
        }
        sent = bytes;
        total = all;
        samples.push([now, bytes]);
        bar.value = bytes;
        draw(now);
      },
      onError: function (err) {
        stop();
        start.disabled = false;
        var code = err.originalResponse ? err.originalResponse.getStatus() : 0;
        status.textContent = "The upload failed" + (code ? " (HTTP " + code + ")" : "") + ". Press Upload to go on from where it stopped.";
      },
      onSuccess: function () {
        stop();
        // GET of the upload's URL answers the stored object's JSON.
        fetch(upload.url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
          .then(function (r) {
            if (!r.ok) {
              throw new Error("HTTP " + r.status);
            }
            return r.json();
          })
          .then(function (o) {
            document.getElementById("object_key").value = o.key;
            document.getElementById("object_version_id").value = o.version_id;
            document.getElementById("object_bucket").value = o.bucket || "";
            bar.value = bar.max;
            status.textContent = "Uploaded " + size(o.size) + " as " + o.key +
              (resumed ? ", resumed after " + resumed + (resumed === 1 ? " break" : " breaks") : "") + ".";
            document.getElementById("object-sha256").textContent = "SHA-256 " + (o.sha256 || "unknown");
          })
          .catch(function (e) {
            status.textContent = "Uploaded, but the stored object could not be read (" + e.message + "); reload the page.";
          });
      },
    });
    upload.findPreviousUploads().then(function (previous) {
      if (previous.length) {
        upload.resumeFromPreviousUpload(previous[0]);
      }
      upload.start();
    });
  });
})();
