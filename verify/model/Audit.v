(* Audit: the statements a reader has to trust, written out in full against the model,
   and the assumption check. If EngineModel.v's theorem were weakened, or needed a
   hypothesis beyond the two kernel-contract clauses and a positive block size, this
   file would stop compiling; Print Assumptions lists any axiom the proofs depend on
   (scripts/check-proof requires "Closed under the global context"). *)
Require Import List.
Import ListNotations.
From Vosti Require Import EngineModel.

Section Audit.

Variables KV Logits SamplerState : Type.
Variable block_size : nat.
Hypothesis block_size_pos : block_size <> 0.
Variable num_blocks : nat.
Variable hash : list Token -> nat.
Variable kv_fn : Token -> list (option KV) -> KV.
Variable logits_fn : Token -> list (option KV) -> Logits.
Variable sample : Logits -> SamplerState -> nat -> list Token -> Token.
Variable kernel_kv : list Row -> nat -> Mem KV -> KV.
Variable kernel_logits : list Row -> nat -> Mem KV -> Logits.

(* The kernel contract, clause (a): the KV a kernel writes for a row depends only on the
   row's token and the KV of positions 0..p-1 read through the row's block table. *)
Hypothesis kernel_kv_contract : forall batch k row m,
  nth_error batch k = Some row ->
  kernel_kv batch k m = kv_fn (r_tok row) (read_kv KV block_size m (r_table row) (r_pos row)).

(* Clause (b): the logits of a row depend only on its token and the KV of 0..p. *)
Hypothesis kernel_logits_contract : forall batch k row m,
  nth_error batch k = Some row ->
  kernel_logits batch k m =
    logits_fn (r_tok row) (read_kv KV block_size m (r_table row) (S (r_pos row))).

Let Reachable := reachable KV Logits SamplerState block_size num_blocks hash sample
                           kernel_kv kernel_logits.
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
                  hash kv_fn logits_fn sample kernel_kv kernel_logits
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
           hash kv_fn logits_fn sample kernel_kv kernel_logits
           kernel_kv_contract kernel_logits_contract).
Qed.

End Audit.

Print Assumptions audited_engine_theorem.
Print Assumptions audited_deterministic_inference.
Print Assumptions every_row_logits.
Print Assumptions nonvacuous.
