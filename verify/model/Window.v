(* Window: the lemma behind window-local KV memory (docs/SPEC.md section 4), proved against
   EngineModel's definitions. It is not yet part of the engine theorem: the model has one
   pool and one table per request, and the window tables' release transition is not a step
   of it (SPEC.md section 6 says so).

   A window layer at position p reads positions p - W + 1 .. p (attention_window_first). The
   scheduler releases a window table's blocks j < first_window_block(c) = (c + 1 - W) / B once
   c positions are computed (src/cache/block_table.h). The lemmas: if every position in a block
   that is NOT released reads its own prefix's KV, then the KV written and the logits computed
   at ANY position p >= c are those of the reference F_D, provided the deployment's kv_fn and
   logits_fn ignore entries before the window (window_kv_fn, window_logits_fn: a property of
   the model, W being part of D). So a released block's contents, whatever reuse put there,
   never reach a result. *)
Require Import List Arith Lia.
Import ListNotations.
From Vosti Require Import ListFacts EngineModel.

Section Window.

Variables KV Logits : Type.
Variable block_size : nat.
Hypothesis block_size_pos : block_size <> 0.
Variable window : nat.  (* W: the largest window of the window layers *)
Variable kv_fn : Token -> list (option KV) -> KV.
Variable logits_fn : Token -> list (option KV) -> Logits.

(* The first position a query at p reads: max(0, p - W + 1) in nat arithmetic. *)
Definition window_first (p : nat) : nat := p + 1 - window.

(* C++ first_window_block(c, W, B): the window table's first entry still held after c
   positions are computed. *)
Definition first_window_block (c : nat) : nat := (c + 1 - window) / block_size.

(* The model's window: the KV of a token at position p = length l depends on the entries of
   positions window_first p .. p - 1 only; the logits at p (length l = p + 1) on window_first p
   .. p only. *)
Hypothesis window_kv_fn : forall t l l', length l = length l' ->
  (forall q, window_first (length l) <= q -> nth_error l q = nth_error l' q) -> kv_fn t l = kv_fn t l'.
Hypothesis window_logits_fn : forall t l l', length l = length l' ->
  (forall q, window_first (length l - 1) <= q -> nth_error l q = nth_error l' q) ->
  logits_fn t l = logits_fn t l'.

(* Positions < n whose block is still held at c read their own prefix's KV. *)
Definition held_slots_ok (m : Mem KV) (tbl : list BlockId) (T : list Token) (c n : nat) : Prop :=
  forall q, q < n -> first_window_block c <= q / block_size ->
    read KV block_size m tbl q = Some (kv_at KV kv_fn T q).

(* A position a query at p >= c reads lies in a block the table still holds. *)
Lemma read_position_is_held : forall c p q,
  c <= p -> window_first p <= q -> first_window_block c <= q / block_size.
Proof.
  intros c p q Hcp Hq. unfold first_window_block. apply Nat.div_le_mono; auto.
  unfold window_first in Hq. lia.
Qed.

Lemma nth_error_map_seq : forall (A : Type) (f : nat -> A) n q,
  q < n -> nth_error (map f (seq 0 n)) q = Some (f q).
Proof.
  intros A f n q Hq. rewrite nth_error_map.
  rewrite (nth_error_nth' (seq 0 n) 0) by (rewrite seq_length; auto).
  rewrite seq_nth by auto. reflexivity.
Qed.

Lemma read_kv_agrees_in_window : forall m tbl T c n p,
  c <= p -> n <= length T -> held_slots_ok m tbl T c n ->
  forall q, window_first p <= q ->
    nth_error (read_kv KV block_size m tbl n) q = nth_error (map Some (kv_seq KV kv_fn (firstn n T))) q.
Proof.
  intros m tbl T c n p Hcp Hn Hs q Hq. unfold read_kv. rewrite (kv_seq_firstn KV block_size block_size_pos) by auto.
  rewrite map_map. destruct (Nat.lt_ge_cases q n) as [Hlt|Hge].
  - rewrite !nth_error_map_seq by auto. f_equal.
    apply Hs; auto. apply (read_position_is_held c p); auto.
  - rewrite !(proj2 (nth_error_None _ _)); auto; rewrite map_length, seq_length; auto.
Qed.

(* The KV written at any position p >= c is kv_at: released blocks are never read. *)
Theorem window_written_kv_is_prefix_function : forall m tbl T c p,
  c <= p -> p < length T -> held_slots_ok m tbl T c p ->
  kv_fn (nth p T 0) (read_kv KV block_size m tbl p) = kv_at KV kv_fn T p.
Proof.
  intros m tbl T c p Hcp Hp Hs. unfold kv_at. apply window_kv_fn.
  - unfold read_kv. rewrite map_length, seq_length, map_length, (kv_seq_firstn KV block_size block_size_pos) by lia.
    rewrite map_length, seq_length. reflexivity.
  - intros q Hq. unfold read_kv in Hq. rewrite map_length, seq_length in Hq.
    apply (read_kv_agrees_in_window m tbl T c p p); auto; lia.
Qed.

(* The logits at any position p >= c are F_D of the prefix: released blocks are never read. *)
Theorem window_logits_are_F_D : forall m tbl T c p,
  c <= p -> p < length T -> held_slots_ok m tbl T c (S p) ->
  logits_fn (nth p T 0) (read_kv KV block_size m tbl (S p)) = F_D KV Logits kv_fn logits_fn (firstn (S p) T).
Proof.
  intros m tbl T c p Hcp Hp Hs. unfold F_D.
  replace (last (firstn (S p) T) 0) with (nth p T 0)
    by (rewrite (firstn_S_nth _ T p 0) by lia; rewrite last_last; reflexivity).
  apply window_logits_fn.
  - unfold read_kv. rewrite map_length, seq_length, map_length, (kv_seq_firstn KV block_size block_size_pos) by lia.
    rewrite map_length, seq_length. reflexivity.
  - intros q Hq. unfold read_kv in Hq. rewrite map_length, seq_length in Hq.
    apply (read_kv_agrees_in_window m tbl T c (S p) p); auto; unfold window_first in *; lia.
Qed.

(* What the C++ release keeps: entries j >= first_window_block c; a released entry j ends
   at or before c - W, so (j + 1) * B + W <= c + 1 (the guard SPEC.md section 4 states). *)
Lemma released_block_ends_before_window : forall c j,
  j < first_window_block c -> (j + 1) * block_size + window <= S c.
Proof.
  intros c j Hj. unfold first_window_block in Hj.
  assert (H1 : (j + 1) * block_size <= (c + 1 - window) / block_size * block_size)
    by (apply Nat.mul_le_mono_r; lia).
  pose proof (Nat.mul_div_le (c + 1 - window) block_size block_size_pos) as H2.
  rewrite Nat.mul_comm in H2.
  assert (window <= c + 1).
  { destruct (Nat.le_gt_cases window (c + 1)) as [H|H]; auto.
    replace (c + 1 - window) with 0 in Hj by lia. rewrite Nat.div_0_l in Hj by auto. lia. }
  lia.
Qed.

End Window.
