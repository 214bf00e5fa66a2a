(* Audit: the statements a reader has to trust, written out in full against the model,
   and the assumption check. If EngineModel.v's theorem were weakened, or needed a
   hypothesis beyond the two kernel-contract clauses and a positive block size, this
   file would stop compiling; Print Assumptions lists any axiom the proofs depend on
   (scripts/check-proof requires "Closed under the global context"). *)
Require Import List Arith Lia.
Import ListNotations.
From Vosti Require Import ListFacts EngineModel.

Section Audit.

Variables KV Logits SamplerState : Type.
Variable block_size : nat.
Hypothesis block_size_pos : block_size <> 0.
Variable num_blocks : nat.
Variable hash : list Token -> nat.
Variable kv_fn : Token -> list (option KV) -> list (option KV) -> KV.
Variable logits_fn : Token -> list (option KV) -> list (option KV) -> Logits.
(* Window-local KV (window_local = false: off, and the three window hypotheses are vacuous).
   The window layers of a query at p read positions p + 1 - W .. p only: a property of the
   model, so of D. *)
Variable window_local : bool.
Variable window : nat.
Hypothesis window_pos : window_local = true -> window <> 0.
Hypothesis window_kv_fn : window_local = true -> forall t l w w', length w = length w' ->
  (forall q, length w + 1 - window <= q -> nth_error w q = nth_error w' q) ->
  kv_fn t l w = kv_fn t l w'.
Hypothesis window_logits_fn : window_local = true -> forall t l w w', length w = length w' ->
  (forall q, length w - 1 + 1 - window <= q -> nth_error w q = nth_error w' q) ->
  logits_fn t l w = logits_fn t l w'.
Variable sample : Logits -> SamplerState -> nat -> list Token -> Token.
Variable kernel_kv : list Row -> nat -> Mem KV -> KV.
Variable kernel_logits : list Row -> nat -> Mem KV -> Logits.

(* The kernel contract, clause (a): the KV a kernel writes for a row depends only on the
   row's token and the KV of positions 0..p-1 read through the row's block table (full
   layers) and its window table (window layers). *)
Hypothesis kernel_kv_contract : forall batch k row m,
  nth_error batch k = Some row ->
  kernel_kv batch k m = kv_fn (r_tok row) (read_kv KV block_size m (r_table row) (r_pos row))
                              (read_kv KV block_size m (r_wtable row) (r_pos row)).
(* Clause (b): the logits of a row depend only on its token and the KV of 0..p. *)
Hypothesis kernel_logits_contract : forall batch k row m,
  nth_error batch k = Some row ->
  kernel_logits batch k m =
    logits_fn (r_tok row) (read_kv KV block_size m (r_table row) (S (r_pos row)))
                          (read_kv KV block_size m (r_wtable row) (S (r_pos row))).

Let Reachable := reachable KV Logits SamplerState block_size num_blocks hash window_local window
                           sample kernel_kv kernel_logits.
Let FD := F_D KV Logits kv_fn logits_fn.

Theorem audited_engine_theorem : forall s, Reachable s ->
  forall x r, requests _ _ _ s x = Some r ->
  forall i, i < length (outputs _ _ r) ->
    nth_error (output_logits _ _ r) i = Some (FD (prompt _ _ r ++ firstn i (outputs _ _ r))) /\
    nth_error (outputs _ _ r) i =
      Some (sample (FD (prompt _ _ r ++ firstn i (outputs _ _ r))) (sampler _ _ r) i
                   (prompt _ _ r ++ firstn i (outputs _ _ r))).
Proof.
  intros s Hs x r Hx i Hi.
  exact (proj2 (engine_theorem KV Logits SamplerState block_size block_size_pos num_blocks
                  hash kv_fn logits_fn window_local window window_pos window_kv_fn window_logits_fn
                  sample kernel_kv kernel_logits
                  kernel_kv_contract kernel_logits_contract s Hs x r Hx) i Hi).
Qed.

Theorem audited_deterministic_inference : forall s1 s2 x1 x2 r1 r2,
  Reachable s1 -> Reachable s2 ->
  requests _ _ _ s1 x1 = Some r1 -> requests _ _ _ s2 x2 = Some r2 ->
  prompt _ _ r1 = prompt _ _ r2 -> sampler _ _ r1 = sampler _ _ r2 ->
  forall i, i < length (outputs _ _ r1) -> i < length (outputs _ _ r2) ->
    nth_error (output_logits _ _ r1) i = nth_error (output_logits _ _ r2) i /\
    nth_error (outputs _ _ r1) i = nth_error (outputs _ _ r2) i.
Proof.
  exact (deterministic_inference KV Logits SamplerState block_size block_size_pos num_blocks
           hash kv_fn logits_fn window_local window window_pos window_kv_fn window_logits_fn
                  sample kernel_kv kernel_logits
           kernel_kv_contract kernel_logits_contract).
Qed.

End Audit.

(* The strongest cross-execution form. Two executions may differ in EVERYTHING the
   model quantifies over -- request streams, scheduling choices, pool size, hash
   function, block size, window-local KV on or off, and even the kernel implementations
   themselves (thread counts, CUDA graphs, padding, split strategies) -- as long as both
   kernel pairs meet the contract with the same logical functions kv_fn and logits_fn
   (which D fixes, with its window W) and the same sampler. Then requests with equal
   prompts and sampler states get equal logits and equal tokens at every output index
   produced in both. *)
Theorem determinism_across_executions :
  forall (KV Logits SamplerState : Type)
         (kv_fn : Token -> list (option KV) -> list (option KV) -> KV)
         (logits_fn : Token -> list (option KV) -> list (option KV) -> Logits)
         (sample : Logits -> SamplerState -> nat -> list Token -> Token)
         (B1 B2 nb1 nb2 W : nat) (wl1 wl2 : bool) (hash1 hash2 : list Token -> nat)
         (kk1 kk2 : list Row -> nat -> Mem KV -> KV)
         (kl1 kl2 : list Row -> nat -> Mem KV -> Logits),
  B1 <> 0 -> B2 <> 0 ->
  (* the window hypotheses, needed only by an execution with window-local KV *)
  (wl1 = true \/ wl2 = true -> W <> 0 /\
     (forall t l w w', length w = length w' ->
        (forall q, length w + 1 - W <= q -> nth_error w q = nth_error w' q) ->
        kv_fn t l w = kv_fn t l w') /\
     (forall t l w w', length w = length w' ->
        (forall q, length w - 1 + 1 - W <= q -> nth_error w q = nth_error w' q) ->
        logits_fn t l w = logits_fn t l w')) ->
  (forall batch k row m, nth_error batch k = Some row ->
     kk1 batch k m = kv_fn (r_tok row) (read_kv KV B1 m (r_table row) (r_pos row))
                           (read_kv KV B1 m (r_wtable row) (r_pos row))) ->
  (forall batch k row m, nth_error batch k = Some row ->
     kl1 batch k m = logits_fn (r_tok row) (read_kv KV B1 m (r_table row) (S (r_pos row)))
                               (read_kv KV B1 m (r_wtable row) (S (r_pos row)))) ->
  (forall batch k row m, nth_error batch k = Some row ->
     kk2 batch k m = kv_fn (r_tok row) (read_kv KV B2 m (r_table row) (r_pos row))
                           (read_kv KV B2 m (r_wtable row) (r_pos row))) ->
  (forall batch k row m, nth_error batch k = Some row ->
     kl2 batch k m = logits_fn (r_tok row) (read_kv KV B2 m (r_table row) (S (r_pos row)))
                               (read_kv KV B2 m (r_wtable row) (S (r_pos row)))) ->
  forall s1 s2 x1 x2 r1 r2,
  reachable KV Logits SamplerState B1 nb1 hash1 wl1 W sample kk1 kl1 s1 ->
  reachable KV Logits SamplerState B2 nb2 hash2 wl2 W sample kk2 kl2 s2 ->
  requests _ _ _ s1 x1 = Some r1 -> requests _ _ _ s2 x2 = Some r2 ->
  prompt _ _ r1 = prompt _ _ r2 -> sampler _ _ r1 = sampler _ _ r2 ->
  forall i, i < length (outputs _ _ r1) -> i < length (outputs _ _ r2) ->
    nth_error (output_logits _ _ r1) i = nth_error (output_logits _ _ r2) i /\
    nth_error (outputs _ _ r1) i = nth_error (outputs _ _ r2) i.
Proof.
  intros KV Logits SamplerState kv_fn logits_fn sample B1 B2 nb1 nb2 W wl1 wl2 hash1 hash2
         kk1 kk2 kl1 kl2 HB1 HB2 HW Ha1 Hb1 Ha2 Hb2 s1 s2 x1 x2 r1 r2 Hs1 Hs2 Hx1 Hx2 Hp Hss.
  destruct (engine_theorem _ _ _ _ HB1 _ _ kv_fn logits_fn wl1 W
              (fun E => proj1 (HW (or_introl E))) (fun E => proj1 (proj2 (HW (or_introl E))))
              (fun E => proj2 (proj2 (HW (or_introl E)))) _ _ _ Ha1 Hb1 s1 Hs1 x1 r1 Hx1) as [_ H1].
  destruct (engine_theorem _ _ _ _ HB2 _ _ kv_fn logits_fn wl2 W
              (fun E => proj1 (HW (or_intror E))) (fun E => proj1 (proj2 (HW (or_intror E))))
              (fun E => proj2 (proj2 (HW (or_intror E)))) _ _ _ Ha2 Hb2 s2 Hs2 x2 r2 Hx2) as [_ H2].
  (* the outputs agree up to every common index, by induction on it *)
  assert (Hpre : forall i, i <= length (outputs _ _ r1) -> i <= length (outputs _ _ r2) ->
                   firstn i (outputs _ _ r1) = firstn i (outputs _ _ r2)).
  { induction i as [|i IH]; intros Hi1 Hi2; [reflexivity|].
    rewrite (firstn_S_nth _ (outputs _ _ r1) i 0), (firstn_S_nth _ (outputs _ _ r2) i 0) by lia.
    rewrite IH by lia. f_equal. cbv beta.
    destruct (H1 i ltac:(lia)) as [_ Ho1]. destruct (H2 i ltac:(lia)) as [_ Ho2].
    apply (nth_error_nth _ _ 0) in Ho1. apply (nth_error_nth _ _ 0) in Ho2.
    assert (E : firstn i (outputs _ _ r1) = firstn i (outputs _ _ r2)) by (apply IH; lia).
    unfold Token in *. rewrite Ho1, Ho2, Hp, Hss, E. reflexivity. }
  intros i Hi1 Hi2.
  destruct (H1 i Hi1) as [Hl1 Ho1]. destruct (H2 i Hi2) as [Hl2 Ho2].
  rewrite Hl1, Hl2, Ho1, Ho2, Hp, Hss, (Hpre i) by lia. split; reflexivity.
Qed.

Print Assumptions audited_engine_theorem.
Print Assumptions audited_deterministic_inference.
Print Assumptions determinism_across_executions.
Print Assumptions every_row_logits.
Print Assumptions nonvacuous.
Print Assumptions nonvacuous_speculation.
Print Assumptions nonvacuous_window.
Print Assumptions nonvacuous_window_speculation.
