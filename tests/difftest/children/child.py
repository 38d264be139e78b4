#!/usr/bin/env python3
"""A test child for nnlens::difftest::process_model (protocol "nnlens-bb 1").

    child.py INPUT_SIZE CLASSES MODE [K]

It serves a fixed linear model: logit[c] = sum_i x[i] * (((7*i + 3*c) % 5) - 2) / 10, answered as
softmax probabilities.  MODE says how it misbehaves (after K good requests where it applies):
  ok        serve until EOF on stdin
  logits    answer raw logits instead of probabilities
  crash     after K answers: read the next request, write half an answer, exit with status 3
  abort     after K answers: read the next request's count, then abort() (SIGABRT)
  exitreq   after K answers: read 4 bytes of the next request and exit 3 (parent gets EPIPE)
  hang      after K answers: read the next request and sleep forever
  noread    print the header, then never read stdin (sleep)
  nohdr     print nothing, sleep forever
  nan       answer NaN in row 0
  sum       answer probabilities times 0.5
  negative  answer -0.5 in class 0 of row 0
  count     announce n + 1 answers
  extra     append 8 extra bytes to each answer
  header    print "hello world" instead of the header
  version   print "nnlens-bb 2 ..." as the header
  stderr    write a traceback-like line to stderr and exit 1 before the header
"""
import math
import os
import struct
import sys
import time

n_in, n_cls, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
k_good = int(sys.argv[4]) if len(sys.argv) > 4 else 0
out, inp = sys.stdout.buffer, sys.stdin.buffer


def read_exact(k):
    data = b""
    while len(data) < k:
        chunk = inp.read(k - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def model(x):
    logits = [sum(x[i] * ((((7 * i + 3 * c) % 5) - 2) / 10.0) for i in range(n_in)) for c in range(n_cls)]
    if mode == "logits":
        return logits
    m = max(logits)
    e = [math.exp(v - m) for v in logits]
    s = sum(e)
    return [v / s for v in e]


if mode == "nohdr":
    time.sleep(1000)
if mode == "stderr":
    sys.stderr.write("Traceback (most recent call last):\nZeroDivisionError: division by zero\n")
    sys.exit(1)
if mode == "header":
    out.write(b"hello world\n")
elif mode == "version":
    out.write(b"nnlens-bb 2 %d %d\n" % (n_in, n_cls))
else:
    out.write(b"nnlens-bb 1 %d %d\n" % (n_in, n_cls))
out.flush()
if mode == "noread":
    time.sleep(1000)

served = 0
while True:
    head = read_exact(4)
    if head is None:
        sys.exit(0)
    (n,) = struct.unpack("<I", head)
    bad = served >= k_good
    if mode == "exitreq" and bad:
        sys.exit(3)
    if mode == "abort" and bad:
        os.abort()
    body = read_exact(4 * n * n_in)
    if body is None:
        sys.exit(0)
    if mode == "hang" and bad:
        time.sleep(1000)
    xs = struct.unpack("<%df" % (n * n_in), body)
    rows = []
    for r in range(n):
        rows.extend(model(xs[r * n_in:(r + 1) * n_in]))
    if mode == "nan":
        rows[0] = float("nan")
    elif mode == "sum":
        rows = [0.5 * v for v in rows]
    elif mode == "negative":
        rows[0] = -0.5
    answer = struct.pack("<I", n + 1 if mode == "count" else n) + struct.pack("<%df" % len(rows), *rows)
    if mode == "crash" and bad:
        out.write(answer[: len(answer) // 2])
        out.flush()
        sys.exit(3)
    if mode == "extra":
        answer += b"\0" * 8
    out.write(answer)
    out.flush()
    served += 1
