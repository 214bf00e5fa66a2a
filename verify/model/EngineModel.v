(* EngineModel: a mechanised model of Vosti's engine (block pool, scheduler, step,
   sampler) and the proof of the engine theorem of docs/SPEC.md:

     in every execution, every emitted logits vector of request r at output index i is
     F_D (prompt r ++ outputs r [0..i)), and the emitted token is
     Sample_D (those logits, sampler state of r, i, prompt r ++ outputs r [0..i)).

   The model is parameterised (Section variables) by the deployment D: block size,
   pool size, the prefix-cache hash, the logical kernel functions and the sampler. The
   ONLY hypotheses are the kernel contract (kernel_kv_contract, kernel_logits_contract)
   and a positive block size. Everything else (which requests arrive, when they abort,
   what the scheduler batches, chunk sizes, which free block allocation evicts, which
   cached block a hash lookup returns, whether the prefix cache is used at all, which draft
   tokens speculative decoding proposes, how many of them a verify chunk computes and
   where the table is truncated after a rejection) is universally quantified through the
   nondeterministic step relation [step]. Speculative decoding: step_draft, verify (a
   draft token is accepted iff it equals the token sampled from the row before it),
   advance (rejected rows are never counted computed) and step_truncate (the roll-back).

   Names mirror src/cache and src/sched: block_table, num_computed (num_computed_tokens),
   ref_count, cached_prefix (BlockPool's cached metadata), key_map (BlockPool::cache_). *)
Require Import List Arith Bool Lia.
Import ListNotations.
From Vosti Require Import ListFacts.

Definition Token := nat.
Definition BlockId := nat.

(* One row of a forward batch: what the runner hands the kernels. A padding row belongs
   to no request and writes nothing. *)
Record Row := mkRow {
  r_req : nat;            (* request id *)
  r_pad : bool;           (* padding row *)
  r_pos : nat;            (* logical position of the token in its sequence *)
  r_tok : Token;          (* the token at r_pos *)
  r_table : list BlockId  (* the request's block table (physical block ids) *)
}.

Definition is_row_of (x : nat) (row : Row) : bool :=
  negb (r_pad row) && Nat.eqb (r_req row) x.

(* Number of rows of request x in rows. *)
Definition cnt (x : nat) (rows : list Row) : nat := length (filter (is_row_of x) rows).

(* Index (counting from k) of request x's row at position p, if the batch has one. *)
Fixpoint find_row (x p : nat) (rows : list Row) (k : nat) : option nat :=
  match rows with
  | [] => None
  | row :: rest => if is_row_of x row && Nat.eqb (r_pos row) p then Some k
                   else find_row x p rest (S k)
  end.

Definition upd {A : Type} (f : nat -> A) (x : nat) (v : A) : nat -> A :=
  fun y => if Nat.eqb y x then v else f y.

Section Engine.

(* ---------------- the deployment D ---------------- *)

Variables KV Logits SamplerState : Type.

Variable block_size : nat.            (* B *)
Hypothesis block_size_pos : block_size <> 0.
Variable num_blocks : nat.            (* physical blocks in the pool *)
Variable hash : list Token -> nat.    (* prefix-cache key of a full-block prefix; ANY function *)

(* The logical kernel functions. kv_fn t kvs: the KV entry (all layers) of token t whose
   earlier positions have KV entries kvs. logits_fn t kvs: the logits at token t whose
   positions 0..p have KV entries kvs. Both are arbitrary. *)
Variable kv_fn : Token -> list (option KV) -> KV.
Variable logits_fn : Token -> list (option KV) -> Logits.

(* Sample_D: per request, keyed by (sampler state incl. seed, output index); it may also
   read the request's token history (repetition/presence penalties). Arbitrary. *)
Variable sample : Logits -> SamplerState -> nat -> list Token -> Token.

(* ---------------- physical KV memory ---------------- *)

(* kv_mem b o: the content of slot o of physical block b (None: never written). *)
Definition Mem := BlockId -> nat -> option KV.

(* Position q of a sequence lives in block table[q / B], slot q mod B. *)
Definition read (m : Mem) (tbl : list BlockId) (q : nat) : option KV :=
  match nth_error tbl (q / block_size) with
  | Some b => m b (q mod block_size)
  | None => None
  end.

(* The KV of positions 0..n-1 as read through the block table. *)
Definition read_kv (m : Mem) (tbl : list BlockId) (n : nat) : list (option KV) :=
  map (read m tbl) (seq 0 n).

Definition upd_mem (m : Mem) (b o : nat) (v : KV) : Mem :=
  fun b' o' => if Nat.eqb b' b && Nat.eqb o' o then Some v else m b' o'.

Definition write (m : Mem) (tbl : list BlockId) (q : nat) (v : KV) : Mem :=
  match nth_error tbl (q / block_size) with
  | Some b => upd_mem m b (q mod block_size) v
  | None => m
  end.

(* ---------------- the kernel contract (the only hypotheses) ---------------- *)

(* What the GPU/CPU kernels compute for row k of a batch, given the whole batch (other
   rows, row index, chunking, physical block ids) and the whole memory. *)
Variable kernel_kv : list Row -> nat -> Mem -> KV.
Variable kernel_logits : list Row -> nat -> Mem -> Logits.

(* (a) The KV written for a row is kv_fn of its token and the KV of positions 0..p-1 read
   through its block table: nothing else of the batch or the memory reaches it. *)
Hypothesis kernel_kv_contract : forall batch k row m,
  nth_error batch k = Some row ->
  kernel_kv batch k m = kv_fn (r_tok row) (read_kv m (r_table row) (r_pos row)).

(* (b) The logits of a row are logits_fn of its token and the KV of positions 0..p read
   through its block table (after the step's writes). *)
Hypothesis kernel_logits_contract : forall batch k row m,
  nth_error batch k = Some row ->
  kernel_logits batch k m = logits_fn (r_tok row) (read_kv m (r_table row) (S (r_pos row))).

(* ---------------- the reference F_D: one sequence alone, one token at a time ---------------- *)

(* Run tokens ts one at a time after KV entries acc (an empty cache: acc = []). *)
Fixpoint kvs_from (acc : list KV) (ts : list Token) : list KV :=
  match ts with
  | [] => acc
  | t :: rest => kvs_from (acc ++ [kv_fn t (map Some acc)]) rest
  end.

Definition kv_seq (ts : list Token) : list KV := kvs_from [] ts.

(* The KV of position q of sequence T: a function of T[0..q] only (kv_at_firstn). *)
Definition kv_at (T : list Token) (q : nat) : KV :=
  kv_fn (nth q T 0) (map Some (kv_seq (firstn q T))).

(* F_D ts: the logits at the last token of ts, computed alone from an empty cache. *)
Definition F_D (ts : list Token) : Logits :=
  logits_fn (last ts 0) (map Some (kv_seq ts)).

(* ---------------- requests and engine state ---------------- *)

Record Request := mkRequest {
  prompt : list Token;
  sampler : SamplerState;         (* sampling parameters and seed *)
  outputs : list Token;           (* emitted tokens *)
  output_logits : list Logits;    (* [outputs] the logits each was sampled from *)
  num_computed : nat;             (* leading tokens whose KV is in the cache *)
  block_table : list BlockId;
  finished : bool;                (* finished or aborted *)
  draft : list Token              (* speculative decoding: draft tokens after the known ones *)
}.

Definition tokens (r : Request) : list Token := prompt r ++ outputs r.

Record State := mkState {
  requests : nat -> option Request;
  request_ids : list nat;                      (* the ids ever admitted *)
  kv_mem : Mem;
  ref_count : BlockId -> nat;
  cached_prefix : BlockId -> option (list Token);  (* a cached block's whole token prefix *)
  key_map : nat -> option BlockId                  (* hash -> cached block (a hint only) *)
}.

Definition init_state (m0 : Mem) : State :=
  mkState (fun _ => None) [] m0 (fun _ => 0) (fun _ => None) (fun _ => None).

Definition set_table (r : Request) (tbl : list BlockId) (nc : nat) (fin : bool) : Request :=
  mkRequest (prompt r) (sampler r) (outputs r) (output_logits r) nc tbl fin (draft r).

Definition set_draft (r : Request) (d : list Token) : Request :=
  mkRequest (prompt r) (sampler r) (outputs r) (output_logits r) (num_computed r)
            (block_table r) (finished r) d.

(* The known tokens followed by the draft: what a speculative step computes rows of. *)
Definition seq_of (r : Request) : list Token := tokens r ++ draft r.

(* Emit token t sampled from logits lg (the draft is consumed). *)
Definition emit (r : Request) (t : Token) (lg : Logits) : Request :=
  mkRequest (prompt r) (sampler r) (outputs r ++ [t]) (output_logits r ++ [lg])
            (num_computed r) (block_table r) (finished r) [].

(* The forward pass: rows k, k+1, ... in batch order; each non-padding row writes its KV. *)
Fixpoint write_rows (batch : list Row) (k : nat) (rows : list Row) (m : Mem) : Mem :=
  match rows with
  | [] => m
  | row :: rest =>
      write_rows batch (S k) rest
        (if r_pad row then m else write m (r_table row) (r_pos row) (kernel_kv batch k m))
  end.

(* Verification (speculative decoding, Scheduler::append_token): if the batch holds the row
   of the request's last known token, its logits are emitted with the token sampled from
   them; while the emitted token EQUALS the next draft token d0, the row computed for d0 is
   now the row of the last known token, and the same happens for it. Without a draft this
   emits one token. *)
Fixpoint verify (batch : list Row) (m : Mem) (x : nat) (r : Request) (d : list Token)
  : Request :=
  match find_row x (length (tokens r) - 1) batch 0 with
  | Some k =>
      let lg := kernel_logits batch k m in
      let t := sample lg (sampler r) (length (outputs r)) (tokens r) in
      match d with
      | d0 :: d' => if Nat.eqb d0 t then verify batch m x (emit r t lg) d' else emit r t lg
      | [] => emit r t lg
      end
  | None => r
  end.

(* After the forward pass with final memory m: request x has computed its rows; if the
   batch holds its last known token, tokens are emitted (verify), and only the positions
   whose token was verified count as computed: the rows of rejected draft tokens are
   rolled back (num_computed never covers them). *)
Definition advance (batch : list Row) (m : Mem) (x : nat) (r : Request) : Request :=
  let nc := num_computed r + cnt x batch in
  match find_row x (length (tokens r) - 1) batch 0 with
  | Some _ =>
      let r' := verify batch m x r (draft r) in
      set_table r' (block_table r) (Nat.min nc (length (tokens r') - 1)) (finished r)
  | None => set_table r (block_table r) nc (finished r)
  end.

(* A legal batch: each non-padding row is the next uncomputed token of a live request
   (rows of one request in increasing position order, anywhere in the batch), within the
   request's tokens followed by its draft tokens (a verify chunk) and its block table. *)
Definition rows_ok (s : State) (batch : list Row) : Prop :=
  forall k row, nth_error batch k = Some row -> r_pad row = false ->
    exists r, requests s (r_req row) = Some r /\ finished r = false /\
      r_pos row = num_computed r + cnt (r_req row) (firstn k batch) /\
      r_pos row < length (seq_of r) /\
      r_pos row < length (block_table r) * block_size /\
      r_tok row = nth (r_pos row) (seq_of r) 0 /\
      r_table row = block_table r.

Definition bounds_ok (s : State) (batch : list Row) : Prop :=
  forall x r, requests s x = Some r ->
    num_computed r + cnt x batch <= length (seq_of r) /\
    num_computed r + cnt x batch <= length (block_table r) * block_size /\
    (* draft rows only in a verify chunk: with the row of the last known token *)
    (num_computed r + cnt x batch <= length (tokens r) \/
     (num_computed r < length (tokens r) /\ find_row x (length (tokens r) - 1) batch 0 <> None)).

(* The engine: any legal transition, in any order, at any time. *)
Inductive step : State -> State -> Prop :=
  (* A request arrives (with its prompt and sampler state). *)
  | step_arrive : forall s x p ss,
      ~ In x (request_ids s) -> p <> [] ->
      step s (mkState (upd (requests s) x (Some (mkRequest p ss [] [] 0 [] false [])))
                      (x :: request_ids s) (kv_mem s) (ref_count s) (cached_prefix s) (key_map s))
  (* Allocation takes ANY free block (ref count 0): evicting it from the prefix cache if
     it was cached. Its stale contents stay in memory. *)
  | step_allocate : forall s x r b,
      requests s x = Some r -> finished r = false -> b < num_blocks -> ref_count s b = 0 ->
      step s (mkState (upd (requests s) x (Some (set_table r (block_table r ++ [b]) (num_computed r) false)))
                      (request_ids s) (kv_mem s) (upd (ref_count s) b 1)
                      (upd (cached_prefix s) b None) (key_map s))
  (* Prefix-cache hit: the key map returns a block for the hash of the request's next
     full-block prefix; the hit is taken only if the block's stored tokens EQUAL that
     prefix (the hash itself is never trusted). *)
  | step_hit : forall s x r b,
      requests s x = Some r -> finished r = false ->
      num_computed r = length (block_table r) * block_size ->
      (length (block_table r) + 1) * block_size <= length (tokens r) ->
      key_map s (hash (firstn ((length (block_table r) + 1) * block_size) (tokens r))) = Some b ->
      cached_prefix s b = Some (firstn ((length (block_table r) + 1) * block_size) (tokens r)) ->
      step s (mkState (upd (requests s) x (Some (set_table r (block_table r ++ [b])
                                   ((length (block_table r) + 1) * block_size) false)))
                      (request_ids s) (kv_mem s) (upd (ref_count s) b (S (ref_count s b)))
                      (cached_prefix s) (key_map s))
  (* Register a full, computed block j of a request in the prefix cache. *)
  | step_register : forall s x r j b,
      requests s x = Some r -> nth_error (block_table r) j = Some b ->
      (j + 1) * block_size <= num_computed r ->
      step s (mkState (requests s) (request_ids s) (kv_mem s) (ref_count s)
                      (upd (cached_prefix s) b (Some (firstn ((j + 1) * block_size) (tokens r))))
                      (upd (key_map s) (hash (firstn ((j + 1) * block_size) (tokens r))) (Some b)))
  (* Speculative decoding: a live request gets draft tokens (ANY tokens) to follow its known
     ones; a later step may compute rows of them (a verify chunk). *)
  | step_draft : forall s x r d,
      requests s x = Some r -> finished r = false ->
      step s (mkState (upd (requests s) x (Some (set_draft r d)))
                      (request_ids s) (kv_mem s) (ref_count s) (cached_prefix s) (key_map s))
  (* Roll-back (BlockPool::truncate): the table keeps its first n blocks, which must cover
     every computed position; the blocks after them are freed. *)
  | step_truncate : forall s x r n,
      requests s x = Some r -> finished r = false ->
      num_computed r <= n * block_size ->
      step s (mkState (upd (requests s) x (Some (set_table r (firstn n (block_table r))
                                                           (num_computed r) false)))
                      (request_ids s) (kv_mem s)
                      (fun b => ref_count s b - occ (skipn n (block_table r)) b)
                      (cached_prefix s) (key_map s))
  (* Release a request's blocks: preemption by recomputation (fin = false: it keeps its
     outputs and recomputes from position 0 later), or finish/abort (fin = true). *)
  | step_release : forall s x r fin,
      requests s x = Some r -> finished r = false ->
      step s (mkState (upd (requests s) x (Some (set_table r [] 0 fin)))
                      (request_ids s) (kv_mem s)
                      (fun b => ref_count s b - occ (block_table r) b)
                      (cached_prefix s) (key_map s))
  (* One engine step: any legal batch (any requests, any chunk sizes, any row order,
     any padding), forward pass, then sampling for requests whose last token was in it. *)
  | step_forward : forall s batch,
      rows_ok s batch -> bounds_ok s batch ->
      step s (mkState (fun x => option_map (advance batch (write_rows batch 0 batch (kv_mem s)) x)
                                           (requests s x))
                      (request_ids s) (write_rows batch 0 batch (kv_mem s))
                      (ref_count s) (cached_prefix s) (key_map s)).

Inductive reachable : State -> Prop :=
  | reach_init : forall m0, reachable (init_state m0)
  | reach_step : forall s s', reachable s -> step s s' -> reachable s'.


(* ======================================================================
   Part 2: facts about the reference F_D
   ====================================================================== *)

Lemma kvs_from_snoc : forall l acc t,
  kvs_from acc (l ++ [t]) = kvs_from acc l ++ [kv_fn t (map Some (kvs_from acc l))].
Proof. induction l as [|a l IH]; intros acc t; simpl; auto. Qed.

(* The KV of a prefix, computed one token at a time, is position-wise kv_at. *)
Lemma kv_seq_firstn : forall T n, n <= length T ->
  kv_seq (firstn n T) = map (kv_at T) (seq 0 n).
Proof.
  intros T n; induction n as [|n IH]; intros Hn; [reflexivity|].
  rewrite (firstn_S_nth _ T n 0) by lia. unfold kv_seq at 1. rewrite kvs_from_snoc.
  change (kvs_from [] (firstn n T)) with (kv_seq (firstn n T)).
  change (kv_fn (nth n T 0) (map Some (kv_seq (firstn n T)))) with (kv_at T n).
  rewrite IH by lia. rewrite seq_S, map_app. reflexivity.
Qed.

Lemma kv_at_app : forall T u q, q < length T -> kv_at (T ++ u) q = kv_at T q.
Proof.
  intros T u q Hq. unfold kv_at. rewrite app_nth1 by auto. rewrite firstn_app_le by lia.
  reflexivity.
Qed.

(* kv_at T q depends only on T[0..q]. *)
Lemma kv_at_firstn : forall T n q, q < n -> n <= length T -> kv_at (firstn n T) q = kv_at T q.
Proof.
  intros T n q Hq Hn. rewrite <- (firstn_skipn n T) at 2. rewrite kv_at_app; auto.
  rewrite firstn_length; lia.
Qed.

(* Positions 0..n-1 of a sequence T read correctly through table tbl. *)
Definition slots_ok (m : Mem) (tbl : list BlockId) (T : list Token) (n : nat) : Prop :=
  forall q, q < n -> read m tbl q = Some (kv_at T q).

Lemma read_kv_ok : forall m tbl T n p,
  slots_ok m tbl T n -> p <= n -> p <= length T ->
  read_kv m tbl p = map Some (kv_seq (firstn p T)).
Proof.
  intros m tbl T n p Hs Hpn HpT. unfold read_kv. rewrite kv_seq_firstn by auto.
  rewrite map_map. apply map_ext_in. intros q Hq. apply in_seq in Hq. apply Hs; lia.
Qed.

(* Contract (a) as the brief states it: what the kernel writes is kv_at T p, a function
   of the logical prefix T[0..p] only, once positions 0..p-1 read correctly. *)
Lemma written_kv_is_prefix_function : forall m tbl T p,
  slots_ok m tbl T p -> p < length T ->
  kv_fn (nth p T 0) (read_kv m tbl p) = kv_at T p.
Proof.
  intros m tbl T p Hs Hp. rewrite (read_kv_ok m tbl T p p) by (auto; lia). reflexivity.
Qed.

Lemma logits_are_F_D : forall m tbl T p,
  slots_ok m tbl T (S p) -> p < length T ->
  logits_fn (nth p T 0) (read_kv m tbl (S p)) = F_D (firstn (S p) T).
Proof.
  intros m tbl T p Hs Hp. unfold F_D. rewrite (read_kv_ok m tbl T (S p) (S p)) by (auto; lia).
  f_equal. rewrite (firstn_S_nth _ T p 0) by lia. rewrite last_last. reflexivity.
Qed.

(* ======================================================================
   Part 3: memory through block tables
   ====================================================================== *)

Lemma read_app : forall m tbl u q,
  q < length tbl * block_size -> read m (tbl ++ u) q = read m tbl q.
Proof.
  intros m tbl u q Hq. unfold read. rewrite nth_error_app1; auto.
  apply div_lt_blocks; auto.
Qed.

Lemma read_write_same : forall m tbl q v b,
  nth_error tbl (q / block_size) = Some b -> read (write m tbl q v) tbl q = Some v.
Proof.
  intros m tbl q v b Hb. unfold read, write. rewrite Hb. unfold upd_mem.
  rewrite !Nat.eqb_refl. reflexivity.
Qed.

Lemma read_write_other : forall m tbl p v b tbl' q,
  nth_error tbl (p / block_size) = Some b ->
  (forall b', nth_error tbl' (q / block_size) = Some b' ->
              b' <> b \/ q mod block_size <> p mod block_size) ->
  read (write m tbl p v) tbl' q = read m tbl' q.
Proof.
  intros m tbl p v b tbl' q Hb Hne. unfold read, write. rewrite Hb.
  destruct (nth_error tbl' (q / block_size)) as [b'|] eqn:E; auto.
  unfold upd_mem. destruct (Hne b' eq_refl) as [H|H].
  - apply Nat.eqb_neq in H. rewrite H. reflexivity.
  - apply Nat.eqb_neq in H. rewrite H, andb_false_r. reflexivity.
Qed.

(* ======================================================================
   Part 4: the invariant
   ====================================================================== *)

Definition outputs_ok (r : Request) : Prop :=
  length (output_logits r) = length (outputs r) /\
  forall i, i < length (outputs r) ->
    nth_error (output_logits r) i = Some (F_D (prompt r ++ firstn i (outputs r))) /\
    nth_error (outputs r) i =
      Some (sample (F_D (prompt r ++ firstn i (outputs r))) (sampler r) i
                   (prompt r ++ firstn i (outputs r))).

(* Per request: its computed positions read exactly kv_at through its table; blocks it
   may still write (not fully computed) are private to it (ref count 1, not cached). *)
Record req_inv (m : Mem) (cp : BlockId -> option (list Token)) (rc : BlockId -> nat)
               (r : Request) : Prop := {
  ri_computed_tokens : num_computed r <= length (tokens r);
  ri_computed_table : num_computed r <= length (block_table r) * block_size;
  ri_slots : slots_ok m (block_table r) (tokens r) (num_computed r);
  ri_private : forall j b, nth_error (block_table r) j = Some b ->
                 num_computed r < (j + 1) * block_size -> cp b = None /\ rc b = 1;
  ri_outputs : outputs_ok r
}.

(* Every cached block is a full block holding exactly the KV of its stored prefix. *)
Definition cached_ok (m : Mem) (cp : BlockId -> option (list Token)) : Prop :=
  forall b pre, cp b = Some pre ->
    exists j, length pre = (j + 1) * block_size /\
      forall o, o < block_size -> m b o = Some (kv_at pre (j * block_size + o)).

(* How many block tables hold block b. *)
Definition held_of (reqs : nat -> option Request) (ids : list nat) (b : BlockId) : nat :=
  sumf (fun x => match reqs x with Some r => occ (block_table r) b | None => 0 end) ids.

Record inv (s : State) : Prop := {
  inv_nodup : NoDup (request_ids s);
  inv_ids : forall x, In x (request_ids s) <-> requests s x <> None;
  inv_ref_count : forall b, ref_count s b = held_of (requests s) (request_ids s) b;
  inv_cached : cached_ok (kv_mem s) (cached_prefix s);
  inv_requests : forall x r, requests s x = Some r ->
                   req_inv (kv_mem s) (cached_prefix s) (ref_count s) r
}.

Lemma upd_eq : forall A (f : nat -> A) x v, upd f x v x = v.
Proof. intros. unfold upd. rewrite Nat.eqb_refl. reflexivity. Qed.

Lemma upd_neq : forall A (f : nat -> A) x v y, y <> x -> upd f x v y = f y.
Proof. intros. unfold upd. apply Nat.eqb_neq in H. rewrite H. reflexivity. Qed.

Lemma held_of_upd : forall reqs ids x r r' b,
  NoDup ids -> In x ids -> reqs x = Some r ->
  held_of (upd reqs x (Some r')) ids b + occ (block_table r) b =
  held_of reqs ids b + occ (block_table r') b.
Proof.
  intros reqs ids x r r' b Hnd Hin Hx. unfold held_of.
  set (f := fun y => match reqs y with Some r0 => occ (block_table r0) b | None => 0 end).
  set (g := fun y => match upd reqs x (Some r') y with
                     | Some r0 => occ (block_table r0) b | None => 0 end).
  replace (occ (block_table r) b) with (f x) by (unfold f; rewrite Hx; reflexivity).
  replace (occ (block_table r') b) with (g x) by (unfold g; rewrite upd_eq; reflexivity).
  apply sumf_update; auto. intros y Hy. unfold f, g. rewrite upd_neq; auto.
Qed.

(* A block with ref count 1 is held by one table, once. *)
Lemma exclusive : forall s x r y r' b,
  inv s -> requests s x = Some r -> In b (block_table r) -> ref_count s b = 1 ->
  requests s y = Some r' -> In b (block_table r') ->
  y = x /\ occ (block_table r) b = 1.
Proof.
  intros s x r y r' b Hinv Hx Hb Hrc Hy Hb'.
  set (f := fun z => match requests s z with Some r0 => occ (block_table r0) b | None => 0 end).
  assert (Hs : sumf f (request_ids s) = 1).
  { rewrite <- Hrc, (inv_ref_count _ Hinv). reflexivity. }
  assert (Hxi : In x (request_ids s)) by (apply (inv_ids _ Hinv); congruence).
  assert (Hyi : In y (request_ids s)) by (apply (inv_ids _ Hinv); congruence).
  assert (Hfx : f x = occ (block_table r) b) by (unfold f; rewrite Hx; reflexivity).
  assert (Hfy : f y = occ (block_table r') b) by (unfold f; rewrite Hy; reflexivity).
  pose proof (occ_In _ _ Hb). pose proof (occ_In _ _ Hb').
  destruct (Nat.eq_dec y x) as [->|Hne].
  - split; auto. pose proof (sumf_le f _ _ Hxi). lia.
  - pose proof (sumf_le2 f _ _ _ (inv_nodup _ Hinv) Hxi Hyi (not_eq_sym Hne)). lia.
Qed.

(* A request's invariant survives changes of cp and rc that spare its private blocks. *)
Lemma req_inv_frame : forall m cp rc cp' rc' r,
  req_inv m cp rc r ->
  (forall j b, nth_error (block_table r) j = Some b -> num_computed r < (j + 1) * block_size ->
               cp b = None -> rc b = 1 -> cp' b = None /\ rc' b = 1) ->
  req_inv m cp' rc' r.
Proof.
  intros m cp rc cp' rc' r Hr Hf. destruct Hr. constructor; auto.
  intros j b Hj Hlt. destruct (ri_private0 j b Hj Hlt). apply (Hf j); auto.
Qed.

Lemma tokens_set_table : forall r tbl nc fin, tokens (set_table r tbl nc fin) = tokens r.
Proof. reflexivity. Qed.

Lemma outputs_ok_set_table : forall r tbl nc fin,
  outputs_ok r -> outputs_ok (set_table r tbl nc fin).
Proof. intros; exact H. Qed.

(* ======================================================================
   Part 5: every transition preserves the invariant
   ====================================================================== *)

Lemma inv_init : forall m0, inv (init_state m0).
Proof.
  intros m0. constructor; simpl.
  - constructor.
  - intros x; split; [contradiction|]. intros H; exfalso; apply H; reflexivity.
  - intros b. reflexivity.
  - intros b pre H; discriminate.
  - intros x r H; discriminate.
Qed.

(* Requests other than x keep their invariant when only x's entry changes. *)
Lemma ids_upd : forall s x r',
  inv s -> In x (request_ids s) ->
  forall y, In y (request_ids s) <-> upd (requests s) x (Some r') y <> None.
Proof.
  intros s x r' Hinv Hx y. destruct (Nat.eq_dec y x) as [->|Hne].
  - rewrite upd_eq. split; auto; discriminate.
  - rewrite upd_neq by auto. apply (inv_ids _ Hinv).
Qed.

Lemma inv_arrive : forall s x p ss,
  inv s -> ~ In x (request_ids s) -> p <> [] ->
  inv (mkState (upd (requests s) x (Some (mkRequest p ss [] [] 0 [] false [])))
               (x :: request_ids s) (kv_mem s) (ref_count s) (cached_prefix s) (key_map s)).
Proof.
  intros s x p ss Hinv Hx Hp.
  assert (Hnone : requests s x = None).
  { destruct (requests s x) eqn:E; auto. exfalso. apply Hx, (inv_ids _ Hinv). congruence. }
  constructor; simpl.
  - constructor; auto. apply (inv_nodup _ Hinv).
  - intros y. destruct (Nat.eq_dec y x) as [->|Hne].
    + rewrite upd_eq. split; [intros _; discriminate|intros _; left; reflexivity].
    + rewrite upd_neq by auto. rewrite <- (inv_ids _ Hinv). simpl. split; [intros [H|H]; [congruence|exact H] | intros H; right; exact H].
  - intros b. rewrite (inv_ref_count _ Hinv). unfold held_of. simpl.
    rewrite upd_eq. simpl. apply sumf_ext. intros y Hy.
    rewrite upd_neq; auto. intro; subst; contradiction.
  - apply (inv_cached _ Hinv).
  - intros y r Hy. destruct (Nat.eq_dec y x) as [->|Hne].
    + rewrite upd_eq in Hy. inversion Hy; subst. constructor; simpl; try lia.
      * intros q Hq; lia.
      * intros j b Hj; destruct j; discriminate.
      * split; simpl; auto. intros i Hi; simpl in Hi; lia.
    + rewrite upd_neq in Hy by auto. apply (inv_requests _ Hinv _ _ Hy).
Qed.

Lemma inv_allocate : forall s x r b,
  inv s -> requests s x = Some r -> ref_count s b = 0 ->
  inv (mkState (upd (requests s) x (Some (set_table r (block_table r ++ [b]) (num_computed r) false)))
               (request_ids s) (kv_mem s) (upd (ref_count s) b 1)
               (upd (cached_prefix s) b None) (key_map s)).
Proof.
  intros s x r b Hinv Hx Hb.
  assert (Hxi : In x (request_ids s)) by (apply (inv_ids _ Hinv); congruence).
  (* A private block has ref count 1, so it is not b. *)
  assert (Hpriv : forall b', ref_count s b' = 1 -> b' <> b) by (intros b' H1 ->; lia).
  constructor; simpl.
  - apply (inv_nodup _ Hinv).
  - apply ids_upd; auto.
  - intros b'. pose proof (held_of_upd (requests s) (request_ids s) x r
        (set_table r (block_table r ++ [b]) (num_computed r) false) b'
        (inv_nodup _ Hinv) Hxi Hx) as Hh.
    simpl in Hh. rewrite occ_app, occ_single in Hh.
    pose proof (inv_ref_count _ Hinv b'). unfold upd at 1.
    destruct (Nat.eq_dec b b') as [->|Hne].
    + rewrite Nat.eqb_refl. lia.
    + apply not_eq_sym, Nat.eqb_neq in Hne as Hne'. rewrite Hne'. lia.
  - intros b' pre Hc. destruct (Nat.eq_dec b' b) as [->|Hne].
    + rewrite upd_eq in Hc; discriminate.
    + rewrite upd_neq in Hc by auto. apply (inv_cached _ Hinv _ _ Hc).
  - intros y ry Hy. destruct (Nat.eq_dec y x) as [->|Hne].
    + rewrite upd_eq in Hy. inversion Hy; subst ry; clear Hy.
      destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho].
      constructor; simpl; auto.
      * rewrite app_length; simpl. lia.
      * intros q Hq. rewrite read_app by lia. apply Hs; auto.
      * intros j b' Hj Hlt. destruct (Nat.lt_ge_cases j (length (block_table r))) as [Hl|Hl].
        -- rewrite nth_error_app1 in Hj by auto. destruct (Hp j b' Hj Hlt) as [Hc Hr].
           pose proof (Hpriv b' Hr). rewrite !upd_neq by auto. auto.
        -- rewrite nth_error_app2 in Hj by auto.
           destruct (j - length (block_table r)) as [|k]; simpl in Hj;
             [|destruct k; discriminate].
           inversion Hj; subst. rewrite !upd_eq. auto.
    + rewrite upd_neq in Hy by auto.
      apply (req_inv_frame _ _ _ _ _ _ (inv_requests _ Hinv _ _ Hy)).
      intros j' b' _ _ Hc Hr. pose proof (Hpriv b' Hr). rewrite !upd_neq by auto. auto.
Qed.

Lemma inv_hit : forall s x r b,
  inv s -> requests s x = Some r ->
  num_computed r = length (block_table r) * block_size ->
  (length (block_table r) + 1) * block_size <= length (tokens r) ->
  cached_prefix s b = Some (firstn ((length (block_table r) + 1) * block_size) (tokens r)) ->
  inv (mkState (upd (requests s) x (Some (set_table r (block_table r ++ [b])
                                   ((length (block_table r) + 1) * block_size) false)))
               (request_ids s) (kv_mem s) (upd (ref_count s) b (S (ref_count s b)))
               (cached_prefix s) (key_map s)).
Proof.
  intros s x r b Hinv Hx Hnc Hlen Hcp.
  set (L := length (block_table r)) in *.
  assert (Hxi : In x (request_ids s)) by (apply (inv_ids _ Hinv); congruence).
  (* A private block is not cached, so it is not b. *)
  assert (Hpriv : forall b', cached_prefix s b' = None -> b' <> b) by congruence.
  constructor; simpl.
  - apply (inv_nodup _ Hinv).
  - apply ids_upd; auto.
  - intros b'. pose proof (held_of_upd (requests s) (request_ids s) x r
        (set_table r (block_table r ++ [b]) ((L + 1) * block_size) false) b'
        (inv_nodup _ Hinv) Hxi Hx) as Hh.
    simpl in Hh. rewrite occ_app, occ_single in Hh.
    pose proof (inv_ref_count _ Hinv b'). unfold upd at 1.
    destruct (Nat.eq_dec b b') as [->|Hne].
    + rewrite Nat.eqb_refl. lia.
    + apply not_eq_sym, Nat.eqb_neq in Hne as Hne'. rewrite Hne'. lia.
  - apply (inv_cached _ Hinv).
  - intros y ry Hy. destruct (Nat.eq_dec y x) as [->|Hne].
    + rewrite upd_eq in Hy. inversion Hy; subst ry; clear Hy.
      destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho].
      constructor; simpl; auto.
      * rewrite app_length; simpl. fold L. lia.
      * intros q Hq. destruct (Nat.lt_ge_cases q (L * block_size)) as [Hl|Hl].
        -- rewrite read_app by lia. apply Hs; lia.
        -- (* q is in the hit block: slot q mod B of b holds kv_at of the stored prefix *)
           destruct (inv_cached _ Hinv _ _ Hcp) as [j [Hj Hslots]].
           rewrite firstn_length, Nat.min_l in Hj by auto.
           assert (j = L) by (apply Nat.mul_cancel_r in Hj; [lia|exact block_size_pos]). subst j.
           set (o := q - L * block_size).
           assert (Hob : o < block_size) by (unfold o; rewrite Nat.mul_add_distr_r in Hq; lia).
           replace q with (L * block_size + o) by (unfold o; lia).
           unfold read. rewrite div_of_block_offset, mod_of_block_offset by auto.
           rewrite nth_error_app2 by lia. rewrite Nat.sub_diag. simpl.
           rewrite Hslots by auto. f_equal. apply kv_at_firstn; auto.
           rewrite Nat.mul_add_distr_r. lia.
      * intros j b' Hj Hlt. exfalso.
        assert (j < L + 1).
        { assert (j < length (block_table r ++ [b])) by (apply nth_error_Some; congruence).
          rewrite app_length in H; simpl in H; fold L in H; lia. }
        assert ((j + 1) * block_size <= (L + 1) * block_size) by (apply Nat.mul_le_mono_r; lia).
        lia.
    + rewrite upd_neq in Hy by auto.
      apply (req_inv_frame _ _ _ _ _ _ (inv_requests _ Hinv _ _ Hy)).
      intros j' b' _ _ Hc Hr. pose proof (Hpriv b' Hc). rewrite !upd_neq by auto. auto.
Qed.

Lemma inv_register : forall s x r j b,
  inv s -> requests s x = Some r -> nth_error (block_table r) j = Some b ->
  (j + 1) * block_size <= num_computed r ->
  inv (mkState (requests s) (request_ids s) (kv_mem s) (ref_count s)
               (upd (cached_prefix s) b (Some (firstn ((j + 1) * block_size) (tokens r))))
               (upd (key_map s) (hash (firstn ((j + 1) * block_size) (tokens r))) (Some b))).
Proof.
  intros s x r j b Hinv Hx Hj Hfull.
  destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho].
  constructor; simpl.
  - apply (inv_nodup _ Hinv).
  - apply (inv_ids _ Hinv).
  - apply (inv_ref_count _ Hinv).
  - intros b' pre Hc. destruct (Nat.eq_dec b' b) as [->|Hne].
    + (* the newly registered block holds kv_at of its prefix: it is full and computed *)
      rewrite upd_eq in Hc. inversion Hc; subst pre; clear Hc.
      exists j. split.
      * rewrite firstn_length, Nat.min_l; lia.
      * intros o Hob.
        assert (Hq : j * block_size + o < num_computed r) by (rewrite Nat.mul_add_distr_r in Hfull; lia).
        pose proof (Hs _ Hq) as Hr. unfold read in Hr.
        rewrite div_of_block_offset, mod_of_block_offset, Hj in Hr by auto.
        rewrite Hr. f_equal. symmetry. apply kv_at_firstn; [|lia].
        rewrite Nat.mul_add_distr_r. lia.
    + rewrite upd_neq in Hc by auto. apply (inv_cached _ Hinv _ _ Hc).
  - intros y ry Hy.
    apply (req_inv_frame _ _ _ _ _ _ (inv_requests _ Hinv _ _ Hy)).
    intros j' b' Hj' Hlt Hc Hr. split; auto.
    destruct (Nat.eq_dec b' b) as [->|Hne]; [|rewrite upd_neq; auto].
    (* b is private to y, so y = x and b sits at one index: j = j', not fully computed *)
    exfalso.
    destruct (exclusive s y ry x r b Hinv Hy (nth_error_In _ _ Hj') Hr Hx (nth_error_In _ _ Hj))
      as [-> Hocc].
    rewrite Hx in Hy. inversion Hy; subst ry.
    pose proof (occ_one_index _ _ _ _ Hocc Hj Hj'). subst j'. lia.
Qed.

Lemma inv_release : forall s x r fin,
  inv s -> requests s x = Some r ->
  inv (mkState (upd (requests s) x (Some (set_table r [] 0 fin)))
               (request_ids s) (kv_mem s)
               (fun b => ref_count s b - occ (block_table r) b)
               (cached_prefix s) (key_map s)).
Proof.
  intros s x r fin Hinv Hx.
  assert (Hxi : In x (request_ids s)) by (apply (inv_ids _ Hinv); congruence).
  constructor; simpl.
  - apply (inv_nodup _ Hinv).
  - apply ids_upd; auto.
  - intros b. pose proof (held_of_upd (requests s) (request_ids s) x r (set_table r [] 0 fin) b
        (inv_nodup _ Hinv) Hxi Hx) as Hh.
    simpl in Hh. pose proof (inv_ref_count _ Hinv b). try change (occ [] b) with 0 in Hh. simpl in Hh. lia.
  - apply (inv_cached _ Hinv).
  - intros y ry Hy. destruct (Nat.eq_dec y x) as [->|Hne].
    + rewrite upd_eq in Hy. inversion Hy; subst ry; clear Hy.
      destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho].
      constructor; simpl; try lia.
      * intros q Hq; lia.
      * intros j b Hj; destruct j; discriminate.
      * apply outputs_ok_set_table; auto.
    + rewrite upd_neq in Hy by auto.
      apply (req_inv_frame _ _ _ _ _ _ (inv_requests _ Hinv _ _ Hy)).
      intros j b Hj Hlt Hc Hr. split; auto.
      destruct (in_dec Nat.eq_dec b (block_table r)) as [Hin|Hnin].
      * exfalso. destruct (exclusive s y ry x r b Hinv Hy (nth_error_In _ _ Hj) Hr Hx Hin).
        congruence.
      * apply (count_occ_not_In Nat.eq_dec) in Hnin. unfold occ. rewrite Hnin. lia.
Qed.

(* A draft changes nothing the invariant reads (tokens are the known ones). *)
Lemma inv_draft : forall s x r d,
  inv s -> requests s x = Some r ->
  inv (mkState (upd (requests s) x (Some (set_draft r d)))
               (request_ids s) (kv_mem s) (ref_count s) (cached_prefix s) (key_map s)).
Proof.
  intros s x r d Hinv Hx.
  assert (Hxi : In x (request_ids s)) by (apply (inv_ids _ Hinv); congruence).
  constructor; simpl.
  - apply (inv_nodup _ Hinv).
  - apply ids_upd; auto.
  - intros b. pose proof (held_of_upd (requests s) (request_ids s) x r (set_draft r d) b
        (inv_nodup _ Hinv) Hxi Hx) as Hh.
    simpl in Hh. pose proof (inv_ref_count _ Hinv b). lia.
  - apply (inv_cached _ Hinv).
  - intros y ry Hy. destruct (Nat.eq_dec y x) as [->|Hne].
    + rewrite upd_eq in Hy. inversion Hy; subst ry; clear Hy.
      destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho].
      constructor; [exact Ht|exact Htb|exact Hs|exact Hp|exact Ho].
    + rewrite upd_neq in Hy by auto. apply (inv_requests _ Hinv _ _ Hy).
Qed.

Lemma read_firstn : forall m tbl n q,
  q < n * block_size -> read m (firstn n tbl) q = read m tbl q.
Proof.
  intros m tbl n q Hq. unfold read. rewrite nth_error_firstn_lt; auto. apply div_lt_blocks; auto.
Qed.

(* Roll-back: the dropped blocks hold no computed position, so they are private (held once,
   by this table): freeing them touches no other request and no cached block. *)
Lemma inv_truncate : forall s x r n,
  inv s -> requests s x = Some r -> num_computed r <= n * block_size ->
  inv (mkState (upd (requests s) x (Some (set_table r (firstn n (block_table r)) (num_computed r) false)))
               (request_ids s) (kv_mem s)
               (fun b => ref_count s b - occ (skipn n (block_table r)) b)
               (cached_prefix s) (key_map s)).
Proof.
  intros s x r n Hinv Hx Hn.
  assert (Hxi : In x (request_ids s)) by (apply (inv_ids _ Hinv); congruence).
  destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho].
  assert (Hocc : forall b, occ (block_table r) b =
                   occ (firstn n (block_table r)) b + occ (skipn n (block_table r)) b).
  { intros b. rewrite <- occ_app, firstn_skipn. reflexivity. }
  constructor; simpl.
  - apply (inv_nodup _ Hinv).
  - apply ids_upd; auto.
  - intros b. pose proof (held_of_upd (requests s) (request_ids s) x r
        (set_table r (firstn n (block_table r)) (num_computed r) false) b
        (inv_nodup _ Hinv) Hxi Hx) as Hh.
    simpl in Hh. pose proof (inv_ref_count _ Hinv b). specialize (Hocc b). lia.
  - apply (inv_cached _ Hinv).
  - intros y ry Hy. destruct (Nat.eq_dec y x) as [->|Hne].
    + rewrite upd_eq in Hy. inversion Hy; subst ry; clear Hy.
      constructor; simpl.
      * exact Ht.
      * rewrite firstn_length. destruct (Nat.min_spec n (length (block_table r))) as [[_ ->]|[_ ->]]; lia.
      * intros q Hq. rewrite read_firstn by lia. apply Hs; auto.
      * intros j b Hj Hlt. destruct (nth_error_firstn_some _ _ _ _ _ Hj) as [Hjn Hj'].
        destruct (Hp j b Hj' Hlt) as [Hc Hr]. split; auto.
        destruct (exclusive s x r x r b Hinv Hx (nth_error_In _ _ Hj') Hr Hx (nth_error_In _ _ Hj'))
          as [_ H1].
        pose proof (occ_In _ _ (nth_error_In _ _ Hj)). specialize (Hocc b). lia.
      * apply outputs_ok_set_table; auto.
    + rewrite upd_neq in Hy by auto.
      apply (req_inv_frame _ _ _ _ _ _ (inv_requests _ Hinv _ _ Hy)).
      intros j b Hj Hlt Hc Hr. split; auto.
      destruct (in_dec Nat.eq_dec b (skipn n (block_table r))) as [Hin|Hnin].
      * exfalso. destruct (exclusive s y ry x r b Hinv Hy (nth_error_In _ _ Hj) Hr Hx
                             (In_skipn_In _ _ _ _ Hin)).
        congruence.
      * apply (count_occ_not_In Nat.eq_dec) in Hnin. unfold occ. rewrite Hnin. lia.
Qed.

(* ---------------- the forward pass ---------------- *)

Lemma cnt_app : forall x l1 l2, cnt x (l1 ++ l2) = cnt x l1 + cnt x l2.
Proof. intros. unfold cnt. rewrite filter_app, app_length. reflexivity. Qed.

Lemma firstn_S_nth_error : forall (l : list Row) k a,
  nth_error l k = Some a -> firstn (S k) l = firstn k l ++ [a].
Proof.
  intros l k a H. assert (k < length l) by (apply nth_error_Some; congruence).
  rewrite (firstn_S_nth _ l k a) by auto. rewrite (nth_error_nth _ _ a H). reflexivity.
Qed.

Lemma cnt_firstn_lt : forall l k row x,
  nth_error l k = Some row -> is_row_of x row = true -> cnt x (firstn k l) < cnt x l.
Proof.
  intros l k row x Hk Hr. destruct (nth_error_split l k Hk) as [l1 [l2 [-> Hlen]]].
  rewrite <- Hlen, firstn_app, firstn_all, Nat.sub_diag. simpl. rewrite app_nil_r.
  rewrite cnt_app. unfold cnt. simpl. rewrite Hr. simpl. lia.
Qed.

Lemma skipn_cons_nth : forall (l : list Row) k a rest,
  skipn k l = a :: rest -> nth_error l k = Some a /\ skipn (S k) l = rest.
Proof.
  induction l as [|b l IH]; intros k a rest H.
  - destruct k; discriminate.
  - destruct k as [|k]; simpl in H.
    + inversion H; subst. split; reflexivity.
    + apply IH in H. simpl. exact H.
Qed.

Lemma find_row_spec : forall rows x p k k',
  find_row x p rows k = Some k' ->
  exists row, nth_error rows (k' - k) = Some row /\ k <= k' /\
              is_row_of x row = true /\ r_pos row = p.
Proof.
  induction rows as [|a rows IH]; simpl; intros x p k k' H; [discriminate|].
  destruct (is_row_of x a && Nat.eqb (r_pos a) p) eqn:E.
  - inversion H; subst k'. apply andb_prop in E as [E1 E2]. apply Nat.eqb_eq in E2.
    exists a. rewrite Nat.sub_diag. auto.
  - destruct (IH _ _ _ _ H) as [row [Hn [Hle [Hi Hp]]]]. exists row.
    replace (k' - k) with (S (k' - S k)) by lia. simpl. auto with arith.
Qed.

(* Mid-pass invariant after the first k rows: every request's positions up to
   num_computed + (its rows among the first k) read correctly; cached blocks intact. *)
Definition fold_inv (s : State) (batch : list Row) (k : nat) (m : Mem) : Prop :=
  cached_ok m (cached_prefix s) /\
  forall x r, requests s x = Some r ->
    slots_ok m (block_table r) (seq_of r) (num_computed r + cnt x (firstn k batch)).

(* One row: its KV is kv_at of its prefix, and its slot is private to it. *)
Lemma fold_step : forall s batch k row m,
  inv s -> rows_ok s batch -> nth_error batch k = Some row -> fold_inv s batch k m ->
  fold_inv s batch (S k)
    (if r_pad row then m else write m (r_table row) (r_pos row) (kernel_kv batch k m)).
Proof.
  intros s batch k row m Hinv Hrows Hk [Hc Hsl].
  unfold fold_inv. rewrite (firstn_S_nth_error batch k row Hk).
  destruct (r_pad row) eqn:Hpad.
  - split; auto. intros x r Hx. rewrite cnt_app. unfold cnt at 2. simpl.
    unfold is_row_of at 1. rewrite Hpad. simpl. rewrite Nat.add_0_r. apply Hsl; auto.
  - destruct (Hrows k row Hk Hpad) as [r0 [Hr0 [_ [Hpos [HposT [HposTb [Htok Htbl]]]]]]].
    set (x0 := r_req row) in *. set (p := r_pos row) in *.
    assert (Hv : kernel_kv batch k m = kv_at (seq_of r0) p).
    { rewrite (kernel_kv_contract batch k row m Hk). rewrite Htok, Htbl.
      apply written_kv_is_prefix_function; auto. intros q Hq. apply (Hsl x0 r0 Hr0). lia. }
    destruct (nth_error_lt _ (block_table r0) (p / block_size)) as [b Hb].
    { apply div_lt_blocks; auto. }
    pose proof (inv_requests _ Hinv _ _ Hr0) as Hri.
    destruct (ri_private _ _ _ _ Hri (p / block_size) b Hb) as [Hcb Hrb].
    { pose proof (pos_lt_block_end block_size p block_size_pos). lia. }
    assert (Hb_in : In b (block_table r0)) by (eapply nth_error_In; eauto).
    rewrite Htbl, Hv. split.
    + intros b' pre Hc'. destruct (Hc b' pre Hc') as [j [Hl Hs]]. exists j; split; auto.
      intros o Ho. unfold write. rewrite Hb. unfold upd_mem.
      assert (Hne : b' <> b) by congruence. apply Nat.eqb_neq in Hne. rewrite Hne. simpl.
      apply Hs; auto.
    + intros x r Hx. rewrite cnt_app. destruct (Nat.eq_dec x x0) as [->|Hne].
      * rewrite Hr0 in Hx. inversion Hx; subst r; clear Hx.
        unfold cnt at 2. simpl. unfold is_row_of at 1. rewrite Hpad, Nat.eqb_refl. simpl.
        destruct (exclusive s x0 r0 x0 r0 b Hinv Hr0 Hb_in Hrb Hr0 Hb_in) as [_ Hocc].
        intros q Hq. destruct (Nat.eq_dec q p) as [->|Hqp].
        -- apply (read_write_same _ _ _ _ b Hb).
        -- rewrite (read_write_other _ _ _ _ b _ _ Hb).
           ++ apply (Hsl x0 r0 Hr0). lia.
           ++ intros b' Hb'. destruct (Nat.eq_dec b' b) as [->|Hne]; [right|left; auto].
              intro Hm. apply Hqp. apply (div_mod_inj block_size); auto.
              apply (occ_one_index _ _ _ _ Hocc Hb' Hb).
      * assert (H0 : cnt x [row] = 0).
        { unfold cnt. simpl. unfold is_row_of. rewrite Hpad. simpl.
          fold x0. apply Nat.eqb_neq in Hne. rewrite Nat.eqb_sym, Hne. reflexivity. }
        rewrite H0, Nat.add_0_r. intros q Hq.
        rewrite (read_write_other _ _ _ _ b _ _ Hb).
        -- apply (Hsl x r Hx). exact Hq.
        -- intros b' Hb'. left. intros ->. apply Hne.
           destruct (exclusive s x0 r0 x r b Hinv Hr0 Hb_in Hrb Hx (nth_error_In _ _ Hb')).
           auto.
Qed.

Lemma fold_all : forall s batch,
  inv s -> rows_ok s batch ->
  forall rows k m, skipn k batch = rows -> fold_inv s batch k m ->
  fold_inv s batch (length batch) (write_rows batch k rows m).
Proof.
  intros s batch Hinv Hrows rows. induction rows as [|a rows IH]; intros k m Hsk Hf; simpl.
  - assert (Hle : length batch <= k).
    { pose proof (skipn_length k batch). rewrite Hsk in H. simpl in H. lia. }
    unfold fold_inv in *. rewrite firstn_all. rewrite firstn_all2 in Hf by auto. exact Hf.
  - destruct (skipn_cons_nth batch k a rows Hsk) as [Hk Hsk'].
    apply (IH (S k)); auto. apply fold_step; auto.
Qed.

Lemma advance_table : forall batch m x r, block_table (advance batch m x r) = block_table r.
Proof. intros. unfold advance. destruct (find_row _ _ _ _); reflexivity. Qed.

Lemma outputs_ok_emit : forall r, outputs_ok r ->
  outputs_ok (emit r (sample (F_D (tokens r)) (sampler r) (length (outputs r)) (tokens r))
                     (F_D (tokens r))).
Proof.
  intros r [Hlen Hout]. unfold outputs_ok, emit. cbn [outputs output_logits prompt sampler]. split.
  - rewrite !app_length. simpl. lia.
  - intros i Hi. rewrite app_length in Hi. simpl in Hi.
    destruct (Nat.lt_ge_cases i (length (outputs r))) as [Hl|Hl].
    + rewrite firstn_app_le by lia. rewrite !nth_error_app1 by lia. apply Hout; auto.
    + assert (i = length (outputs r)) by lia. subst i.
      rewrite firstn_app_le, firstn_all by lia.
      rewrite <- Hlen at 1. rewrite !nth_error_snoc_last. split; reflexivity.
Qed.

Lemma tokens_emit : forall r t lg, tokens (emit r t lg) = tokens r ++ [t].
Proof. intros. unfold tokens, emit. simpl. apply app_assoc. Qed.

Lemma firstn_length_app : forall (A : Type) (l u : list A), firstn (length l) (l ++ u) = l.
Proof. intros. rewrite firstn_app_le, firstn_all; auto. Qed.

(* Verification, by induction on the draft: every token emitted is Sample_D of F_D of the
   tokens before it, and the resulting tokens agree with the computed sequence Sq (known
   tokens ++ draft) on every position but the last (the draft tokens accepted are exactly
   the ones equal to what was emitted). *)
Lemma verify_spec : forall batch m x tbl Sq N,
  slots_ok m tbl Sq N -> N <= length Sq ->
  (forall k row, nth_error batch k = Some row -> is_row_of x row = true ->
     r_pos row < N /\ r_tok row = nth (r_pos row) Sq 0 /\ r_table row = tbl) ->
  forall d r, tokens r ++ d = Sq -> 0 < length (tokens r) -> outputs_ok r ->
  outputs_ok (verify batch m x r d) /\
  length (tokens r) <= length (tokens (verify batch m x r d)) /\
  firstn (length (tokens (verify batch m x r d)) - 1) (tokens (verify batch m x r d)) =
    firstn (length (tokens (verify batch m x r d)) - 1) Sq /\
  length (tokens (verify batch m x r d)) - 1 <= length Sq.
Proof.
  intros batch m x tbl Sq N Hsl HN Hrow d. induction d as [|d0 d IH]; intros r HS Hne Ho;
    cbn [verify]; destruct (find_row x (length (tokens r) - 1) batch 0) as [k|] eqn:Hf.
  all: try (subst Sq; rewrite app_length; split; [exact Ho|]; split; [lia|];
            split; [rewrite firstn_app_le by lia; reflexivity|lia]).
  all: destruct (find_row_spec _ _ _ _ _ Hf) as [row [Hk [_ [Hr Hpos]]]];
       rewrite Nat.sub_0_r in Hk; destruct (Hrow k row Hk Hr) as [HpN [Htok Htbl]];
       assert (Hlg : kernel_logits batch k m = F_D (tokens r))
         by (rewrite (kernel_logits_contract batch k row m Hk), Htok, Htbl, Hpos;
             rewrite logits_are_F_D by ((intros q Hq; apply Hsl; lia) || (rewrite <- HS, app_length; lia));
             replace (S (length (tokens r) - 1)) with (length (tokens r)) by lia;
             rewrite <- HS, firstn_length_app; reflexivity);
       rewrite Hlg.
  all: set (t := sample (F_D (tokens r)) (sampler r) (length (outputs r)) (tokens r)).
  - (* no draft: one token *)
    rewrite tokens_emit, app_length. simpl. replace (length (tokens r) + 1 - 1) with (length (tokens r)) by lia.
    rewrite <- HS, !app_nil_r, firstn_all. split; [apply outputs_ok_emit; exact Ho|].
    split; [lia|]. split; [rewrite firstn_length_app; reflexivity|lia].
  - destruct (Nat.eqb d0 t) eqn:E.
    + (* d0 accepted: its row is the row of the new last known token *)
      apply Nat.eqb_eq in E. subst d0.
      destruct (IH (emit r t (F_D (tokens r)))) as [Ho' [Hl' Hrest]].
      * rewrite tokens_emit, <- HS, <- app_assoc. reflexivity.
      * rewrite tokens_emit, app_length. simpl. lia.
      * apply outputs_ok_emit; exact Ho.
      * rewrite tokens_emit, app_length in Hl'. simpl in Hl'. split; [exact Ho'|]. split; [lia|exact Hrest].
    + (* d0 rejected: the emitted token ends the run *)
      rewrite tokens_emit, app_length. simpl. replace (length (tokens r) + 1 - 1) with (length (tokens r)) by lia.
      rewrite <- HS, !firstn_length_app. split; [apply outputs_ok_emit; exact Ho|].
      split; [lia|]. split; [reflexivity|rewrite app_length; simpl; lia].
Qed.

Lemma slots_ok_seq : forall m r,
  num_computed r <= length (tokens r) ->
  slots_ok m (block_table r) (tokens r) (num_computed r) ->
  slots_ok m (block_table r) (seq_of r) (num_computed r).
Proof. intros m r Hn Hs q Hq. unfold seq_of. rewrite kv_at_app by lia. apply Hs; auto. Qed.

(* After the pass: the request's logits, if emitted, are F_D of its tokens. *)
Lemma advance_inv : forall s batch m x r,
  inv s -> rows_ok s batch -> bounds_ok s batch -> requests s x = Some r ->
  slots_ok m (block_table r) (seq_of r) (num_computed r + cnt x batch) ->
  req_inv m (cached_prefix s) (ref_count s) (advance batch m x r).
Proof.
  intros s batch m x r Hinv Hrows Hbounds Hx Hslots.
  destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho].
  destruct (Hbounds x r Hx) as [Hb1 [Hb2 Hb3]].
  set (N := num_computed r + cnt x batch) in *.
  unfold advance. fold N. destruct (find_row x (length (tokens r) - 1) batch 0) as [k|] eqn:Hf.
  - destruct (find_row_spec _ _ _ _ _ Hf) as [row [Hk [_ [Hrow Hpos]]]].
    rewrite Nat.sub_0_r in Hk.
    pose proof Hrow as Hrow'. apply andb_prop in Hrow' as [Hpad Hreq]. apply negb_true_iff in Hpad.
    apply Nat.eqb_eq in Hreq.
    destruct (Hrows k row Hk Hpad) as [r0 [Hr0 [_ [Hpos0 _]]]].
    rewrite Hreq, Hx in Hr0. inversion Hr0; subst r0; clear Hr0. rewrite Hreq in Hpos0.
    pose proof (cnt_firstn_lt batch k row x Hk Hrow) as Hlt.
    assert (Hne : 0 < length (tokens r)) by (destruct Hb3 as [Hb3|[Hb3 _]]; unfold N in *; lia).
    assert (Hnc : num_computed r <= length (tokens r) - 1) by lia.
    assert (Hrows_x : forall k' row', nth_error batch k' = Some row' -> is_row_of x row' = true ->
              r_pos row' < N /\ r_tok row' = nth (r_pos row') (seq_of r) 0 /\ r_table row' = block_table r).
    { intros k' row' Hk' Hr'. pose proof Hr' as Hr''. apply andb_prop in Hr'' as [Hpad' Hreq'].
      apply negb_true_iff in Hpad'. apply Nat.eqb_eq in Hreq'.
      destruct (Hrows k' row' Hk' Hpad') as [r1 [Hr1 [_ [Hpos1 [_ [_ [Htok1 Htbl1]]]]]]].
      rewrite Hreq', Hx in Hr1. inversion Hr1; subst r1; clear Hr1.
      pose proof (cnt_firstn_lt batch k' row' x Hk' Hr'). rewrite Hreq' in Hpos1.
      split; [unfold N; lia|auto]. }
    destruct (verify_spec batch m x (block_table r) (seq_of r) N Hslots Hb1 Hrows_x (draft r) r
                eq_refl Hne Ho) as [Ho' [Hl' [Hpre' Hle']]].
    set (r' := verify batch m x r (draft r)) in *.
    constructor; rewrite ?tokens_set_table; cbn [num_computed block_table set_table].
    + lia.
    + lia.
    + intros q Hq. rewrite (Hslots q) by lia. f_equal.
      rewrite <- (kv_at_firstn (tokens r') (length (tokens r') - 1)) by lia.
      rewrite Hpre'. symmetry. apply kv_at_firstn; lia.
    + intros j b Hj Hlt'. apply (Hp j); auto. lia.
    + apply outputs_ok_set_table; auto.
  - destruct Hb3 as [Hb3|[_ Hb3]]; [|contradiction].
    constructor; rewrite ?tokens_set_table; simpl; try lia.
    + intros q Hq. rewrite (Hslots q Hq). unfold seq_of. rewrite kv_at_app by lia. reflexivity.
    + intros j b Hj Hlt'. apply (Hp j); auto. lia.
    + apply outputs_ok_set_table; auto.
Qed.

Lemma inv_forward : forall s batch,
  inv s -> rows_ok s batch -> bounds_ok s batch ->
  inv (mkState (fun x => option_map (advance batch (write_rows batch 0 batch (kv_mem s)) x)
                                    (requests s x))
               (request_ids s) (write_rows batch 0 batch (kv_mem s))
               (ref_count s) (cached_prefix s) (key_map s)).
Proof.
  intros s batch Hinv Hrows Hbounds.
  assert (Hf : fold_inv s batch (length batch) (write_rows batch 0 batch (kv_mem s))).
  { apply fold_all; auto. split.
    - apply (inv_cached _ Hinv).
    - intros x r Hx. simpl. rewrite Nat.add_0_r. destruct (inv_requests _ Hinv _ _ Hx).
      apply slots_ok_seq; auto. }
  unfold fold_inv in Hf. rewrite firstn_all in Hf. destruct Hf as [Hc Hsl].
  constructor; simpl.
  - apply (inv_nodup _ Hinv).
  - intros x. rewrite (inv_ids _ Hinv). destruct (requests s x); simpl; split; congruence.
  - intros b. rewrite (inv_ref_count _ Hinv). unfold held_of. apply sumf_ext. intros y _.
    destruct (requests s y); simpl; [rewrite advance_table|]; reflexivity.
  - exact Hc.
  - intros x r' Hx'. destruct (requests s x) as [r|] eqn:Hx; simpl in Hx'; [|discriminate].
    inversion Hx'; subst r'. apply (advance_inv s); auto.
Qed.

(* Every non-padding row of a legal batch (prompt positions included, so prompt
   logprobs too) gets the logits F_D (tokens[0..p]) of its logical prefix. *)
Lemma row_logits_inv : forall s batch k row,
  inv s -> rows_ok s batch -> bounds_ok s batch ->
  nth_error batch k = Some row -> r_pad row = false ->
  exists r, requests s (r_req row) = Some r /\
    kernel_logits batch k (write_rows batch 0 batch (kv_mem s)) =
      F_D (firstn (S (r_pos row)) (seq_of r)).
Proof.
  intros s batch k row Hinv Hrows Hbounds Hk Hpad.
  assert (Hf : fold_inv s batch (length batch) (write_rows batch 0 batch (kv_mem s))).
  { apply fold_all; auto. split.
    - apply (inv_cached _ Hinv).
    - intros x r Hx. simpl. rewrite Nat.add_0_r. destruct (inv_requests _ Hinv _ _ Hx).
      apply slots_ok_seq; auto. }
  unfold fold_inv in Hf. rewrite firstn_all in Hf. destruct Hf as [_ Hsl].
  destruct (Hrows k row Hk Hpad) as [r [Hr [_ [Hpos [HposT [_ [Htok Htbl]]]]]]].
  exists r. split; auto.
  rewrite (kernel_logits_contract batch k row _ Hk), Htok, Htbl.
  apply logits_are_F_D; auto. intros q Hq. apply (Hsl _ _ Hr).
  pose proof (cnt_firstn_lt batch k row (r_req row) Hk) as Hlt.
  unfold is_row_of in Hlt. rewrite Hpad, Nat.eqb_refl in Hlt. simpl in Hlt.
  specialize (Hlt eq_refl). lia.
Qed.

(* ======================================================================
   Part 6: the engine theorem
   ====================================================================== *)

Lemma inv_step : forall s s', inv s -> step s s' -> inv s'.
Proof.
  intros s s' Hinv Hstep. destruct Hstep.
  - apply inv_arrive; auto.
  - apply inv_allocate; auto.
  - apply inv_hit; auto.
  - eapply inv_register; eauto.
  - apply inv_draft; auto.
  - apply inv_truncate; auto.
  - apply inv_release; auto.
  - apply inv_forward; auto.
Qed.

Lemma inv_reachable : forall s, reachable s -> inv s.
Proof.
  intros s H. induction H.
  - apply inv_init.
  - eapply inv_step; eauto.
Qed.

(* THE ENGINE THEOREM (DESIGN.md section 1, in the form we prove): in every reachable
   state of every execution, for every request r and every output index i, the logits
   emitted at i are F_D (prompt ++ outputs[0..i)), and the token emitted at i is
   Sample_D of those logits, r's sampler state and i. *)
Theorem engine_theorem : forall s, reachable s ->
  forall x r, requests s x = Some r ->
  length (output_logits r) = length (outputs r) /\
  forall i, i < length (outputs r) ->
    nth_error (output_logits r) i = Some (F_D (prompt r ++ firstn i (outputs r))) /\
    nth_error (outputs r) i =
      Some (sample (F_D (prompt r ++ firstn i (outputs r))) (sampler r) i
                   (prompt r ++ firstn i (outputs r))).
Proof.
  intros s Hs x r Hx. apply (ri_outputs _ _ _ _ (inv_requests _ (inv_reachable s Hs) _ _ Hx)).
Qed.

(* The outputs of two requests with the same prompt and sampler state agree on every
   index both have produced, in any two executions. *)
Lemma outputs_prefix_agree : forall s1 s2 x1 x2 r1 r2,
  reachable s1 -> reachable s2 ->
  requests s1 x1 = Some r1 -> requests s2 x2 = Some r2 ->
  prompt r1 = prompt r2 -> sampler r1 = sampler r2 ->
  forall i, i <= length (outputs r1) -> i <= length (outputs r2) ->
  firstn i (outputs r1) = firstn i (outputs r2).
Proof.
  intros s1 s2 x1 x2 r1 r2 Hs1 Hs2 Hx1 Hx2 Hp Hss i.
  destruct (engine_theorem s1 Hs1 x1 r1 Hx1) as [_ H1].
  destruct (engine_theorem s2 Hs2 x2 r2 Hx2) as [_ H2].
  induction i as [|i IH]; intros Hi1 Hi2; [reflexivity|].
  rewrite (firstn_S_nth _ (outputs r1) i 0), (firstn_S_nth _ (outputs r2) i 0) by lia.
  rewrite IH by lia. f_equal. cbv beta.
  destruct (H1 i ltac:(lia)) as [_ Ho1]. destruct (H2 i ltac:(lia)) as [_ Ho2].
  apply (nth_error_nth _ _ 0) in Ho1. apply (nth_error_nth _ _ 0) in Ho2.
  assert (E : firstn i (outputs r1) = firstn i (outputs r2)) by (apply IH; lia).
  unfold Token in *. rewrite Ho1, Ho2, Hp, Hss, E. reflexivity.
Qed.

(* DETERMINISTIC INFERENCE (DESIGN.md section 1, first form): for any two executions
   E1, E2 and requests served in both with the same prompt and sampler state, the logits
   and the tokens at every output index produced in both are equal. *)
Theorem deterministic_inference : forall s1 s2 x1 x2 r1 r2,
  reachable s1 -> reachable s2 ->
  requests s1 x1 = Some r1 -> requests s2 x2 = Some r2 ->
  prompt r1 = prompt r2 -> sampler r1 = sampler r2 ->
  forall i, i < length (outputs r1) -> i < length (outputs r2) ->
  nth_error (output_logits r1) i = nth_error (output_logits r2) i /\
  nth_error (outputs r1) i = nth_error (outputs r2) i.
Proof.
  intros s1 s2 x1 x2 r1 r2 Hs1 Hs2 Hx1 Hx2 Hp Hss i Hi1 Hi2.
  destruct (engine_theorem s1 Hs1 x1 r1 Hx1) as [_ H1].
  destruct (engine_theorem s2 Hs2 x2 r2 Hx2) as [_ H2].
  destruct (H1 i Hi1) as [Hl1 Ho1]. destruct (H2 i Hi2) as [Hl2 Ho2].
  rewrite Hl1, Hl2, Ho1, Ho2, Hp, Hss.
  rewrite (outputs_prefix_agree s1 s2 x1 x2 r1 r2 Hs1 Hs2 Hx1 Hx2 Hp Hss i) by lia.
  split; reflexivity.
Qed.

(* The model is not vacuous: with one physical block, a request arrives, gets a block,
   is computed in one forward step and emits a token. So the step guards are
   satisfiable and reachable states with outputs exist. *)
Lemma nonvacuous : 0 < num_blocks -> forall (m0 : Mem) (t : Token) (ss : SamplerState),
  exists s r, reachable s /\ requests s 0 = Some r /\ length (outputs r) = 1.
Proof.
  intros Hnb m0 t ss.
  assert (Hne : [t] <> []) by discriminate.
  pose proof (reach_step _ _ (reach_init m0)
                (step_arrive (init_state m0) 0 [t] ss (fun H => H) Hne)) as R1.
  match type of R1 with reachable ?s => set (s1 := s) in R1 end.
  set (r1 := mkRequest [t] ss [] [] 0 [] false []).
  pose proof (reach_step _ _ R1 (step_allocate s1 0 r1 0 eq_refl eq_refl Hnb eq_refl)) as R2.
  match type of R2 with reachable ?s => set (s2 := s) in R2 end.
  set (r2 := set_table r1 ([] ++ [0]) 0 false).
  set (batch := [mkRow 0 false 0 t [0]]).
  assert (Hrows : rows_ok s2 batch).
  { intros k row Hk Hpad. destruct k as [|k]; [|destruct k; discriminate].
    simpl in Hk. inversion Hk; subst row. exists r2.
    repeat split; simpl; try reflexivity; lia. }
  assert (Hbounds : bounds_ok s2 batch).
  { intros x r Hx. destruct (Nat.eq_dec x 0) as [->|Hx0].
    - unfold s2, s1 in Hx. simpl in Hx. inversion Hx; subst r. unfold batch, cnt. simpl. lia.
    - unfold s2, s1 in Hx. simpl in Hx. unfold upd in Hx. apply Nat.eqb_neq in Hx0. rewrite Hx0 in Hx.
      discriminate. }
  pose proof (reach_step _ _ R2 (step_forward s2 batch Hrows Hbounds)) as R3.
  eexists. eexists. split; [exact R3|]. split; [reflexivity|]. reflexivity.
Qed.

(* Every non-padding row of every legal batch in every execution, prompt positions
   included (prompt logprobs), gets the logits F_D (tokens[0..p]). *)
Theorem every_row_logits : forall s batch k row,
  reachable s -> rows_ok s batch -> bounds_ok s batch ->
  nth_error batch k = Some row -> r_pad row = false ->
  exists r, requests s (r_req row) = Some r /\
    kernel_logits batch k (write_rows batch 0 batch (kv_mem s)) =
      F_D (firstn (S (r_pos row)) (seq_of r)).
Proof. intros s batch k row Hs. apply row_logits_inv, inv_reachable, Hs. Qed.

(* Speculation is not vacuous either: with two physical blocks, a request with a one-token
   prompt and a draft equal to what the target samples gets a verify chunk of two rows, and
   that ONE forward step emits two tokens (the draft is accepted). *)
Lemma nonvacuous_speculation : 1 < num_blocks -> forall (m0 : Mem) (t : Token) (ss : SamplerState),
  exists s batch r,
    reachable s /\ rows_ok s batch /\ bounds_ok s batch /\
    requests s 0 = Some r /\ outputs r = [] /\
    length (outputs (advance batch (write_rows batch 0 batch (kv_mem s)) 0 r)) = 2.
Proof.
  intros Hnb m0 t ss.
  assert (Hne : [t] <> []) by discriminate.
  pose proof (reach_step _ _ (reach_init m0)
                (step_arrive (init_state m0) 0 [t] ss (fun H => H) Hne)) as R1.
  match type of R1 with reachable ?s => set (s1 := s) in R1 end.
  set (r1 := mkRequest [t] ss [] [] 0 [] false []).
  pose proof (reach_step _ _ R1 (step_allocate s1 0 r1 0 eq_refl eq_refl ltac:(lia) eq_refl)) as R2.
  match type of R2 with reachable ?s => set (s2 := s) in R2 end.
  set (r2 := set_table r1 ([] ++ [0]) 0 false).
  pose proof (reach_step _ _ R2 (step_allocate s2 0 r2 1 eq_refl eq_refl Hnb eq_refl)) as R3.
  match type of R3 with reachable ?s => set (s3 := s) in R3 end.
  set (r3 := set_table r2 (block_table r2 ++ [1]) 0 false).
  set (d0 := sample (F_D [t]) ss 0 [t]).
  pose proof (reach_step _ _ R3 (step_draft s3 0 r3 [d0] eq_refl eq_refl)) as R4.
  match type of R4 with reachable ?s => set (s4 := s) in R4 end.
  set (r4 := set_draft r3 [d0]).
  set (batch := [mkRow 0 false 0 t [0; 1]; mkRow 0 false 1 d0 [0; 1]]).
  assert (Hrows : rows_ok s4 batch).
  { intros k row Hk Hpad.
    destruct k as [|[|k]]; simpl in Hk; try (destruct k; discriminate); inversion Hk; subst row;
      exists r4; split; try reflexivity; repeat split; simpl; try reflexivity; lia. }
  assert (Hbounds : bounds_ok s4 batch).
  { intros x r Hx. destruct (Nat.eq_dec x 0) as [->|Hx0].
    - unfold s4 in Hx. simpl in Hx. inversion Hx; subst r. unfold batch, cnt. simpl.
      split; [lia|]. split; [lia|]. right. split; [lia|discriminate].
    - unfold s4, s3, s2, s1 in Hx. simpl in Hx. unfold upd in Hx. apply Nat.eqb_neq in Hx0.
      rewrite Hx0 in Hx. discriminate. }
  destruct (every_row_logits s4 batch 0 (mkRow 0 false 0 t [0; 1]) R4 Hrows Hbounds eq_refl eq_refl)
    as [r [Hr Hlg]].
  simpl in Hr. inversion Hr; subst r. clear Hr.
  exists s4, batch, r4. split; [exact R4|]. split; [exact Hrows|]. split; [exact Hbounds|].
  split; [reflexivity|]. split; [reflexivity|].
  unfold advance, verify. cbn [find_row batch is_row_of r_pad r_req r_pos negb andb Nat.eqb length
                              tokens prompt outputs app r4 set_draft r3 set_table r2 r1 draft Nat.sub].
  rewrite Hlg. cbn [firstn seq_of tokens prompt outputs app r4 set_draft r3 set_table r2 r1 draft].
  fold d0. rewrite Nat.eqb_refl. reflexivity.
Qed.

End Engine.
