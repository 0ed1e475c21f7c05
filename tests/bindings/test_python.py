"""The Python binding (ctypes over dsv41.h) on the tiny8 oracle model: greedy tokens equal the
oracle's (and so the C++ API's, tests/golden/runtime), logits equal the oracle's, errors are typed.
Run by ctest with DSV41_LIBRARY and PYTHONPATH set (tests/bindings/CMakeLists.txt)."""

import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

import dsv41

FIXTURES = os.environ["DSV41_FIXTURES_DIR"]
TINY8 = os.path.join(FIXTURES, "golden", "tiny8")


class BindingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(TINY8, "golden.json"), encoding="utf-8") as f:
            cls.golden = json.load(f)
        cls.model = dsv41.Model(TINY8)
        cls.prompt1 = next(p for p in cls.golden["prompts"] if p["name"] == "prompt1")

    def test_tokenize_matches_the_oracle_prompt(self):
        self.assertEqual(self.model.tokenize(self.prompt1["text"]), self.prompt1["ids"])
        self.assertEqual(self.model.detokenize(self.prompt1["ids"]), self.prompt1["text"])

    def test_greedy_generation_equals_the_oracle(self):
        with dsv41.Engine(self.model) as engine:
            events = list(engine.generate(self.prompt1["ids"], max_tokens=12, temperature=0.0,
                                          ignore_eos=True))
        tokens = [e.token for e in events if not e.finished]
        self.assertEqual(tokens, self.golden["greedy"]["tokens"])
        self.assertTrue(events[-1].finished)
        self.assertEqual(events[-1].finish_reason, "length")
        self.assertEqual(events[-1].completion_tokens, 12)

    def test_logprobs_are_the_log_softmax_of_the_session_logits(self):
        prompt = self.prompt1["ids"]
        with dsv41.Engine(self.model) as engine:
            events = [e for e in engine.generate(prompt, max_tokens=4, temperature=0.0,
                                                 ignore_eos=True, top_logprobs=3)
                      if not e.finished]
            plain = [e for e in engine.generate(prompt, max_tokens=1, temperature=0.0,
                                                ignore_eos=True)]
        self.assertIsNone(plain[0].logprob)
        s = dsv41.Session(self.model)
        logits = s.append(prompt)
        for e in events:
            m = max(logits)
            lse = m + math.log(sum(math.exp(x - m) for x in logits))
            self.assertAlmostEqual(e.logprob, logits[e.token] - lse, places=4)
            self.assertEqual(len(e.top_logprobs), 3)
            self.assertEqual(e.top_logprobs[0][0], e.token)  # greedy
            self.assertAlmostEqual(e.top_logprobs[0][1], e.logprob, places=6)
            logits = s.append([e.token])
        with dsv41.Engine(self.model) as engine:
            with self.assertRaises(dsv41.Dsv41Error) as cm:
                list(engine.generate(prompt, max_tokens=1, top_logprobs=21))
        self.assertIn("top_logprobs = 21", str(cm.exception))

    def test_min_tokens_keeps_stop_tokens_out_until_then(self):
        first = self.golden["greedy"]["tokens"][0]
        with dsv41.Engine(self.model) as engine:
            plain = [e.token for e in engine.generate(self.prompt1["ids"], max_tokens=8,
                                                      temperature=0.0, ignore_eos=True,
                                                      stop_token_ids=[first])
                     if not e.finished]
            held = [e.token for e in engine.generate(self.prompt1["ids"], max_tokens=8,
                                                     temperature=0.0, ignore_eos=True,
                                                     stop_token_ids=[first], min_tokens=3)
                    if not e.finished]
            with self.assertRaises(dsv41.Dsv41Error) as cm:
                list(engine.generate(self.prompt1["ids"], max_tokens=2, min_tokens=3))
        self.assertEqual(plain, [first])
        self.assertGreaterEqual(len(held), 3)
        self.assertNotIn(first, held[:3])
        self.assertIn("min_tokens = 3", str(cm.exception))

    def test_speculative_engine_gives_the_same_tokens(self):
        prompt = self.prompt1["ids"] * 2
        runs = []
        for spec in (0, 5):
            with dsv41.Engine(self.model, speculative_tokens=spec) as engine:
                events = list(engine.generate(prompt, max_tokens=16, temperature=0.0,
                                              ignore_eos=True))
            runs.append([e.token for e in events if not e.finished])
        self.assertEqual(len(runs[0]), 16)
        self.assertEqual(runs[0], runs[1])
        with self.assertRaises(dsv41.Dsv41Error) as cm:
            dsv41.Engine(self.model, speculative_tokens=16)
        self.assertIn("speculative_tokens = 16", str(cm.exception))
        with self.assertRaises(ValueError):
            dsv41.Engine(self.model, speculative_tokens=5, speculative_method="medusa")
        with self.assertRaises(dsv41.Dsv41Error) as cm:
            dsv41.Engine(self.model, speculative_tokens=5, speculative_method="dspark")
        self.assertIn("ModelParams.dspark = true", str(cm.exception))
        with self.assertRaises(dsv41.Dsv41Error) as cm:  # tiny8 has no mtp.* module
            dsv41.Model(TINY8, dspark=True)
        self.assertIn("num_nextn_predict_layers = 0", str(cm.exception))

    def test_model_facts(self):
        self.assertEqual(self.model.hidden_size, 96)  # tiny8
        self.assertGreater(self.model.max_context, 0)
        self.assertEqual(self.model.backend, "cpu")
        self.assertEqual(self.model.image_encoder, "")  # no tower tensors in tiny8
        self.assertGreaterEqual(self.model.image_token, 0)

    def test_session_logits_argmax(self):
        s = dsv41.Session(self.model)
        logits = s.append(self.prompt1["ids"])
        self.assertEqual(len(logits), self.model.vocab_size)
        self.assertTrue(all(math.isfinite(x) for x in logits))
        argmax = max(range(len(logits)), key=logits.__getitem__)
        self.assertEqual(argmax, self.golden["greedy"]["tokens"][0])
        self.assertEqual(s.position, len(self.prompt1["ids"]))
        s.rollback(3)
        self.assertEqual(s.position, len(self.prompt1["ids"]) - 3)
        self.assertEqual(s.append(self.prompt1["ids"][-3:]), logits)  # bit-identical
        with self.assertRaises(dsv41.Dsv41Error) as ctx:
            s.rollback(17)
        self.assertEqual(ctx.exception.status, "invalid_argument")

    def test_errors_are_typed_and_name_the_problem(self):
        with self.assertRaises(dsv41.Dsv41Error) as ctx:
            dsv41.Model(os.path.join(FIXTURES, "does-not-exist"))
        self.assertEqual(ctx.exception.status, "not_found")
        with self.assertRaises(dsv41.Dsv41Error) as ctx:
            dsv41.Model(TINY8, backend="tpu")
        self.assertEqual(ctx.exception.status, "invalid_argument")
        self.assertIn('ModelParams.backend = "tpu"', str(ctx.exception))
        with dsv41.Engine(self.model) as engine:
            with self.assertRaises(dsv41.Dsv41Error) as ctx:
                list(engine.generate([0, 10**6], max_tokens=2))
            self.assertEqual(ctx.exception.status, "invalid_argument")
            self.assertIn("prompt[1]", str(ctx.exception))
            with self.assertRaises(dsv41.Dsv41Error) as ctx:
                list(engine.generate([0, 5], top_p=3.0))
            self.assertIn("top_p", str(ctx.exception))

    def test_images_on_a_text_only_model_are_refused_by_name(self):
        # tiny8 declares the released vision_config but ships no tower (the tower itself is
        # covered by tests/golden/vision through the same C calls).
        with self.assertRaises(dsv41.Dsv41Error) as ctx:
            self.model.encode_image(4, 4, bytes(48))
        self.assertEqual(ctx.exception.status, "unsupported")
        self.assertIn("vision.patch_embed.proj.weight", str(ctx.exception))
        with self.assertRaises(dsv41.Dsv41Error) as ctx:
            self.model.encode_image(4, 5, bytes(48))
        self.assertEqual(ctx.exception.status, "unsupported")  # the tower is checked first
        with self.assertRaises(dsv41.Dsv41Error) as ctx:
            self.model.encode_image_file(b"not an image")
        self.assertEqual(ctx.exception.status, "invalid_argument")
        self.assertIn("unknown format", str(ctx.exception))

    def test_leaving_generate_early_cancels_and_never_crashes(self):
        # The ctypes callback outlives every generator (one module-level dispatcher): a break, an
        # exception in the loop or closing the engine right after used to free it while the
        # scheduler still called it (segfault).
        with dsv41.Engine(self.model) as engine:
            for _ in engine.generate([0, 17], max_tokens=50, temperature=0.0, ignore_eos=True):
                break
        engine = dsv41.Engine(self.model)
        with self.assertRaises(KeyError):
            for _ in engine.generate([0, 17], max_tokens=50, temperature=0.0, ignore_eos=True):
                raise KeyError("consumer failed")
        gen = engine.generate([0, 17], max_tokens=50, temperature=0.0, ignore_eos=True)
        next(gen)
        del gen  # collected mid-stream: cancelled
        # The engine still serves a full request afterwards.
        events = list(engine.generate([0, 17], max_tokens=4, temperature=0.0, ignore_eos=True))
        self.assertEqual(events[-1].completion_tokens, 4)
        engine.close()
        with self.assertRaises(dsv41.Dsv41Error):
            next(engine.generate([0, 17], max_tokens=4))

    def test_out_of_range_integers_are_refused_not_wrapped(self):
        s = dsv41.Session(self.model)
        with self.assertRaises(ValueError) as ctx:
            s.append([0, 2**32 + 5])
        self.assertIn("ids[1]", str(ctx.exception))
        self.assertEqual(s.position, 0)
        with self.assertRaises(ValueError):
            self.model.detokenize([2**32 + 5])
        with self.assertRaises(ValueError) as ctx:
            s.rollback(2**64 + 2)
        self.assertIn("n = ", str(ctx.exception))
        with self.assertRaises(ValueError):
            dsv41.Engine(self.model, max_sequences=2**32 + 1)
        # encode_image's width and height are int32 in C: 2**32 + 4 must not arrive as 4.
        for w, h in ((2**32 + 4, 4), (4, 2**31)):
            with self.assertRaises(ValueError) as ctx:
                self.model.encode_image(w, h, bytes(48))
            self.assertIn("width" if w > 4 else "height", str(ctx.exception))
        with dsv41.Engine(self.model) as engine:
            with self.assertRaises(ValueError) as ctx:
                next(engine.generate([0, 5], seed=2**64 + 7))
            self.assertIn("seed", str(ctx.exception))
            with self.assertRaises(ValueError) as ctx:
                next(engine.generate([0, 2**31]))
            self.assertIn("prompt[1]", str(ctx.exception))

    def test_failed_constructors_leave_no_destructor_error(self):
        seen = []
        old, sys.unraisablehook = sys.unraisablehook, lambda u: seen.append(u)
        try:
            with self.assertRaises(dsv41.Dsv41Error):
                dsv41.Model(os.path.join(FIXTURES, "does-not-exist"))
            import gc
            gc.collect()
        finally:
            sys.unraisablehook = old
        self.assertEqual(seen, [], [str(u.exc_value) for u in seen])

    def test_session_fork_reset_tokens_and_model_facts(self):
        s = dsv41.Session(self.model)
        s.append([0, 17, 5])
        self.assertEqual(s.tokens, [0, 17, 5])
        f = s.fork()
        self.assertEqual(s.append([9]), f.append([9]))
        s.reset()
        self.assertEqual((s.position, s.tokens, f.position), (0, [], 4))
        self.assertGreaterEqual(self.model.bos_token, 0)
        self.assertTrue(dsv41._ffi.lib().dsv41_version().decode())


def rgb_png(w, h):
    """An 8-bit RGB PNG of a colour gradient."""
    raw = b"".join(b"\0" + bytes((x * 37 + y * 11 + c * 5) & 255 for x in range(w) for c in range(3))
                   for y in range(h))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


@unittest.skipUnless(os.environ.get("DSV41_MAKE_SYNTHETIC"), "needs dsv41_make_synthetic")
class ImageBindingTest(unittest.TestCase):
    """Images through the binding on a tiny synthetic checkpoint with a vision tower."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="dsv41-py-vision-")
        subprocess.run([os.environ["DSV41_MAKE_SYNTHETIC"], cls.dir, "--tiny", "--vision"],
                       check=True, stdout=subprocess.DEVNULL)
        shutil.copy(os.path.join(TINY8, "tokenizer.json"), cls.dir)
        cls.model = dsv41.Model(cls.dir)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_file_and_pixels_give_the_same_span_and_logits(self):
        png = rgb_png(20, 14)
        pixels = bytes((x * 37 + y * 11 + c * 5) & 255
                       for y in range(14) for x in range(20) for c in range(3))
        a = self.model.encode_image_file(png)
        b = self.model.encode_image(20, 14, pixels)
        self.assertEqual(a.positions, 17)
        self.assertEqual(b.positions, 17)
        out = []
        for img in (a, b):
            s = dsv41.Session(self.model)
            s.append([0, 5])
            logits = s.append_image(img, all_logits=True)
            self.assertEqual(len(logits), 17 * self.model.vocab_size)
            self.assertEqual(s.position, 19)
            out.append(logits)
        self.assertEqual(out[0], out[1])

    def test_engine_request_with_an_image_decodes_as_a_session(self):
        img = self.model.encode_image_file(rgb_png(20, 14))
        image_id = 599  # the synthetic checkpoint's image_token_id
        prompt = [0, 5] + [image_id] * img.positions + [7]
        s = dsv41.Session(self.model)
        s.append([0, 5])
        s.append_image(img)
        logits = s.append([7])
        want = []
        for _ in range(4):
            want.append(max(range(len(logits)), key=logits.__getitem__))
            logits = s.append([want[-1]])
        with dsv41.Engine(self.model) as engine:
            got = [e.token for e in engine.generate(prompt, max_tokens=4, temperature=0.0,
                                                    ignore_eos=True, images=[(2, img)])
                   if not e.finished]
            self.assertEqual(got, want)
            with self.assertRaises(dsv41.Dsv41Error) as cm:  # the span is not at offset 0
                list(engine.generate(prompt, max_tokens=1, images=[(0, img)]))
            self.assertIn("GenerationRequest.images[0]", str(cm.exception))
            with self.assertRaises(ValueError):
                list(engine.generate(prompt, max_tokens=1, images=[img]))

    def test_bad_images_are_refused_by_name(self):
        with self.assertRaises(dsv41.Dsv41Error) as ctx:
            self.model.encode_image(20, 14, bytes(10))
        self.assertEqual(ctx.exception.status, "invalid_argument")
        self.assertIn("20x14", str(ctx.exception))
        with self.assertRaises(dsv41.Dsv41Error) as ctx:
            self.model.encode_image_file(rgb_png(20, 14), max_pixels=100)
        self.assertIn("exceeds the limit of 100", str(ctx.exception))


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False).result.wasSuccessful() else 1)
