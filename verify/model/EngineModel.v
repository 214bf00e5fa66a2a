(* EngineModel: a mechanised model of Vosti's engine (block pool, scheduler, step,
   sampler) and the proof of the engine theorem of docs/SPEC.md:

     in every execution, every emitted logits vector of request r at output index i is
     F_D (prompt r ++ outputs r [0..i)), and the emitted token is
     Sample_D (those logits, sampler state of r, i, prompt r ++ outputs r [0..i)).

   The model is parameterised (Section variables) by the deployment D: block size,
   pool size, the prefix-cache hash, the logical kernel functions, the sampler, and
   whether window-local KV is on (window_local) with the window W of the window layers.
   The ONLY hypotheses are the kernel contract (kernel_kv_contract, kernel_logits_contract),
   a positive block size, and, with window-local KV only, the window hypotheses (window_pos,
   window_kv_fn, window_logits_fn: the window layers ignore positions before their window,
   a property of the model). Everything else (which requests arrive, when they abort, what
   the scheduler batches, chunk sizes, which free block allocation evicts, which cached
   block a hash lookup returns, whether the prefix cache is used at all, which draft tokens
   speculative decoding proposes, how many of them a verify chunk computes, where the table
   is truncated after a rejection, when window entries are released) is universally
   quantified through the nondeterministic step relation [step]. Speculative decoding:
   step_draft, verify (a draft token is accepted iff it equals the token sampled from the
   row before it), advance (rejected rows are never counted computed) and step_truncate
   (the roll-back). Window-local KV: a window table per request, read by the window layers,
   with step_window_allocate / _hit / _hole / _register / _release, and step_window_truncate
   (speculation's roll-back of the window table: both together are covered).

   One pool and one block-id space hold both tables' blocks: the C++ window pool is the
   special case of blocks the full table never takes (the refinement test maps window
   block b to F + b), which allocation (ANY free block) and hits (ANY cached block with
   equal tokens) over-approximate.

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
  r_table : list BlockId; (* the request's block table (physical block ids) *)
  r_wtable : list BlockId (* the table the window layers read: the window table with
                             window-local KV, else the block table *)
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

(* The logical kernel functions. kv_fn t kvs wkvs: the KV entry (all layers) of token t
   whose earlier positions have KV entries kvs as the full layers read them and wkvs as the
   window layers read them. logits_fn t kvs wkvs: the logits at token t whose positions
   0..p have KV entries kvs / wkvs. Both are arbitrary (the reference gives both views the
   same entries). *)
Variable kv_fn : Token -> list (option KV) -> list (option KV) -> KV.
Variable logits_fn : Token -> list (option KV) -> list (option KV) -> Logits.

(* Window-local KV memory (docs/SPEC.md section 4): with window_local, each request also has
   a window table for the window layers, whose leading blocks no window reads any more are
   released. W (window) is the largest window of the window layers: a query at p reads
   positions window_first p = max(0, p - W + 1) .. p of them. *)
Variable window_local : bool.
Variable window : nat.
Definition window_first (p : nat) : nat := p + 1 - window.
(* C++ first_window_block(c, W, B): the first window-table entry a query at c or later reads. *)
Definition first_window_block (c : nat) : nat := (c + 1 - window) / block_size.

(* The window hypotheses (W is part of D, only needed with window_local): the window
   layers ignore the entries before the window. *)
Hypothesis window_pos : window_local = true -> window <> 0.
Hypothesis window_kv_fn : window_local = true -> forall t l w w', length w = length w' ->
  (forall q, window_first (length w) <= q -> nth_error w q = nth_error w' q) ->
  kv_fn t l w = kv_fn t l w'.
Hypothesis window_logits_fn : window_local = true -> forall t l w w', length w = length w' ->
  (forall q, window_first (length w - 1) <= q -> nth_error w q = nth_error w' q) ->
  logits_fn t l w = logits_fn t l w'.

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

(* ---------------- the kernel contract ---------------- *)

(* What the GPU/CPU kernels compute for row k of a batch, given the whole batch (other
   rows, row index, chunking, physical block ids) and the whole memory. *)
Variable kernel_kv : list Row -> nat -> Mem -> KV.
Variable kernel_logits : list Row -> nat -> Mem -> Logits.

(* (a) The KV written for a row is kv_fn of its token and the KV of positions 0..p-1 read
   through its block table (full layers) and its window table (window layers): nothing else
   of the batch or the memory reaches it. *)
Hypothesis kernel_kv_contract : forall batch k row m,
  nth_error batch k = Some row ->
  kernel_kv batch k m = kv_fn (r_tok row) (read_kv m (r_table row) (r_pos row))
                              (read_kv m (r_wtable row) (r_pos row)).

(* (b) The logits of a row are logits_fn of its token and the KV of positions 0..p read
   through its tables (after the step's writes). *)
Hypothesis kernel_logits_contract : forall batch k row m,
  nth_error batch k = Some row ->
  kernel_logits batch k m = logits_fn (r_tok row) (read_kv m (r_table row) (S (r_pos row)))
                                      (read_kv m (r_wtable row) (S (r_pos row))).

(* ---------------- the reference F_D: one sequence alone, one token at a time ---------------- *)

(* Run tokens ts one at a time after KV entries acc (an empty cache: acc = []). *)
Fixpoint kvs_from (acc : list KV) (ts : list Token) : list KV :=
  match ts with
  | [] => acc
  | t :: rest => kvs_from (acc ++ [kv_fn t (map Some acc) (map Some acc)]) rest
  end.

Definition kv_seq (ts : list Token) : list KV := kvs_from [] ts.

(* The KV of position q of sequence T: a function of T[0..q] only (kv_at_firstn). *)
Definition kv_at (T : list Token) (q : nat) : KV :=
  kv_fn (nth q T 0) (map Some (kv_seq (firstn q T))) (map Some (kv_seq (firstn q T))).

(* F_D ts: the logits at the last token of ts, computed alone from an empty cache. *)
Definition F_D (ts : list Token) : Logits :=
  logits_fn (last ts 0) (map Some (kv_seq ts)) (map Some (kv_seq ts)).

(* ---------------- requests and engine state ---------------- *)

Record Request := mkRequest {
  prompt : list Token;
  sampler : SamplerState;         (* sampling parameters and seed *)
  outputs : list Token;           (* emitted tokens *)
  output_logits : list Logits;    (* [outputs] the logits each was sampled from *)
  num_computed : nat;             (* leading tokens whose KV is in the cache *)
  block_table : list BlockId;
  finished : bool;                (* finished or aborted *)
  draft : list Token;             (* speculative decoding: draft tokens after the known ones *)
  window_table : list BlockId;    (* window-local KV: the window layers' table *)
  window_released : nat           (* its leading entries released (kNoBlock in C++) *)
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
  mkRequest (prompt r) (sampler r) (outputs r) (output_logits r) nc tbl fin (draft r)
            (window_table r) (window_released r).

Definition set_window (r : Request) (wtbl : list BlockId) (wrel : nat) : Request :=
  mkRequest (prompt r) (sampler r) (outputs r) (output_logits r) (num_computed r)
            (block_table r) (finished r) (draft r) wtbl wrel.

(* Release (preemption, finish, abort): both tables emptied, nothing computed. *)
Definition release_tables (r : Request) (fin : bool) : Request :=
  mkRequest (prompt r) (sampler r) (outputs r) (output_logits r) 0 [] fin (draft r) [] 0.

(* The blocks a request holds (each counted in ref_count): its block table and the window
   table's entries not released. *)
Definition held (r : Request) : list BlockId :=
  block_table r ++ skipn (window_released r) (window_table r).

(* The table a row's window layers read. *)
Definition window_view (r : Request) : list BlockId :=
  if window_local then window_table r else block_table r.

Definition set_draft (r : Request) (d : list Token) : Request :=
  mkRequest (prompt r) (sampler r) (outputs r) (output_logits r) (num_computed r)
            (block_table r) (finished r) d (window_table r) (window_released r).

(* The known tokens followed by the draft: what a speculative step computes rows of. *)
Definition seq_of (r : Request) : list Token := tokens r ++ draft r.

(* Emit token t sampled from logits lg (the draft is consumed). *)
Definition emit (r : Request) (t : Token) (lg : Logits) : Request :=
  mkRequest (prompt r) (sampler r) (outputs r ++ [t]) (output_logits r ++ [lg])
            (num_computed r) (block_table r) (finished r) [] (window_table r) (window_released r).

(* The forward pass: rows k, k+1, ... in batch order; each non-padding row writes its KV
   through its block table and through its window table. *)
Definition write_row (row : Row) (v : KV) (m : Mem) : Mem :=
  write (write m (r_table row) (r_pos row) v) (r_wtable row) (r_pos row) v.

Fixpoint write_rows (batch : list Row) (k : nat) (rows : list Row) (m : Mem) : Mem :=
  match rows with
  | [] => m
  | row :: rest =>
      write_rows batch (S k) rest
        (if r_pad row then m else write_row row (kernel_kv batch k m) m)
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
      r_table row = block_table r /\
      r_wtable row = window_view r /\
      (window_local = true -> r_pos row < length (window_table r) * block_size).

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
      step s (mkState (upd (requests s) x (Some (mkRequest p ss [] [] 0 [] false [] [] 0)))
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
      length (window_table r) <= length (block_table r) ->
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
  (* Window-local KV: the window table gets ANY free block past the computed positions. *)
  | step_window_allocate : forall s x r b,
      window_local = true ->
      requests s x = Some r -> finished r = false -> b < num_blocks -> ref_count s b = 0 ->
      num_computed r <= length (window_table r) * block_size ->
      step s (mkState (upd (requests s) x (Some (set_window r (window_table r ++ [b]) (window_released r))))
                      (request_ids s) (kv_mem s) (upd (ref_count s) b 1)
                      (upd (cached_prefix s) b None) (key_map s))
  (* A window-table prefix hit: block j of the window table is a cached block whose stored
     tokens EQUAL the request's prefix through block j, within the computed positions. *)
  | step_window_hit : forall s x r b,
      window_local = true ->
      requests s x = Some r -> finished r = false ->
      (length (window_table r) + 1) * block_size <= num_computed r ->
      cached_prefix s b = Some (firstn ((length (window_table r) + 1) * block_size) (tokens r)) ->
      step s (mkState (upd (requests s) x (Some (set_window r (window_table r ++ [b]) (window_released r))))
                      (request_ids s) (kv_mem s) (upd (ref_count s) b (S (ref_count s b)))
                      (cached_prefix s) (key_map s))
  (* A hole at a hit's leading window entries (PrefixMatch::skip_leading): an entry no window
     reads at the computed positions is appended released; it holds no block. *)
  | step_window_hole : forall s x r,
      window_local = true ->
      requests s x = Some r -> finished r = false ->
      window_released r = length (window_table r) ->
      length (window_table r) < first_window_block (num_computed r) ->
      step s (mkState (upd (requests s) x (Some (set_window r (window_table r ++ [0])
                                                            (S (window_released r)))))
                      (request_ids s) (kv_mem s) (ref_count s) (cached_prefix s) (key_map s))
  (* Register a full, computed, held block j of a window table (the window pool's key map is
     a hint the model does not need). *)
  | step_window_register : forall s x r j b,
      requests s x = Some r -> window_released r <= j -> nth_error (window_table r) j = Some b ->
      (j + 1) * block_size <= num_computed r ->
      step s (mkState (requests s) (request_ids s) (kv_mem s) (ref_count s)
                      (upd (cached_prefix s) b (Some (firstn ((j + 1) * block_size) (tokens r))))
                      (key_map s))
  (* Window release (BlockPool::release_leading): the first held window entry is released
     once it lies before first_window_block of the computed positions. *)
  | step_window_release : forall s x r b,
      requests s x = Some r -> finished r = false ->
      nth_error (window_table r) (window_released r) = Some b ->
      window_released r < first_window_block (num_computed r) ->
      step s (mkState (upd (requests s) x (Some (set_window r (window_table r) (S (window_released r)))))
                      (request_ids s) (kv_mem s) (upd (ref_count s) b (ref_count s b - 1))
                      (cached_prefix s) (key_map s))
  (* Speculative roll-back of a window table (BlockPool::truncate on it): it keeps its first n
     entries, which hold every released entry and cover every computed position; the held
     entries after them (draft positions only) are freed. *)
  | step_window_truncate : forall s x r n,
      window_local = true ->
      requests s x = Some r -> finished r = false ->
      window_released r <= n -> num_computed r <= n * block_size ->
      step s (mkState (upd (requests s) x (Some (set_window r (firstn n (window_table r)) (window_released r))))
                      (request_ids s) (kv_mem s)
                      (fun b => ref_count s b - occ (skipn n (window_table r)) b)
                      (cached_prefix s) (key_map s))
  (* Release a request's blocks: preemption by recomputation (fin = false: it keeps its
     outputs and recomputes from position 0 later), or finish/abort (fin = true). *)
  | step_release : forall s x r fin,
      requests s x = Some r -> finished r = false ->
      step s (mkState (upd (requests s) x (Some (release_tables r fin)))
                      (request_ids s) (kv_mem s)
                      (fun b => ref_count s b - occ (held r) b)
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
  kvs_from acc (l ++ [t]) = kvs_from acc l ++ [kv_fn t (map Some (kvs_from acc l)) (map Some (kvs_from acc l))].
Proof. induction l as [|a l IH]; intros acc t; simpl; auto. Qed.

(* The KV of a prefix, computed one token at a time, is position-wise kv_at. *)
Lemma kv_seq_firstn : forall T n, n <= length T ->
  kv_seq (firstn n T) = map (kv_at T) (seq 0 n).
Proof.
  intros T n; induction n as [|n IH]; intros Hn; [reflexivity|].
  rewrite (firstn_S_nth _ T n 0) by lia. unfold kv_seq at 1. rewrite kvs_from_snoc.
  change (kvs_from [] (firstn n T)) with (kv_seq (firstn n T)).
  change (kv_fn (nth n T 0) (map Some (kv_seq (firstn n T))) (map Some (kv_seq (firstn n T))))
    with (kv_at T n).
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

(* What the window layers of a query at p read through wtbl, among positions 0..n-1: with
   window-local KV, the positions of its window read the KV of their own prefix; without,
   the window layers read through the block table. *)
Definition wreads_ok (m : Mem) (tbl wtbl : list BlockId) (T : list Token) (p n : nat) : Prop :=
  (window_local = true ->
     forall q, q < n -> window_first p <= q -> read m wtbl q = Some (kv_at T q)) /\
  (window_local = false -> wtbl = tbl).

Lemma nth_error_map_seq : forall (A : Type) (f : nat -> A) n q,
  q < n -> nth_error (map f (seq 0 n)) q = Some (f q).
Proof.
  intros A f n q Hq. rewrite nth_error_map.
  rewrite (nth_error_nth' (seq 0 n) 0) by (rewrite seq_length; auto).
  rewrite seq_nth by auto. reflexivity.
Qed.

Lemma length_kv_seq_firstn : forall T n, n <= length T -> length (map Some (kv_seq (firstn n T))) = n.
Proof. intros T n Hn. rewrite map_length, kv_seq_firstn, map_length, seq_length; auto. Qed.

(* Within the window, the window view reads what the reference has (the window lemma). *)
Lemma window_view_agrees : forall m wtbl T n f,
  n <= length T -> (forall q, q < n -> f <= q -> read m wtbl q = Some (kv_at T q)) ->
  forall q, f <= q -> nth_error (read_kv m wtbl n) q = nth_error (map Some (kv_seq (firstn n T))) q.
Proof.
  intros m wtbl T n f Hn Hs q Hq. unfold read_kv. rewrite kv_seq_firstn by auto.
  rewrite map_map. destruct (Nat.lt_ge_cases q n) as [Hlt|Hge].
  - rewrite !nth_error_map_seq by auto. f_equal. apply Hs; auto.
  - rewrite !(proj2 (nth_error_None _ _)); auto; rewrite map_length, seq_length; auto.
Qed.

(* Contract (a) as the brief states it: what the kernel writes is kv_at T p, a function
   of the logical prefix T[0..p] only, once positions 0..p-1 read correctly (through the
   window table: those of the window). *)
Lemma written_kv_is_prefix_function : forall m tbl wtbl T p,
  slots_ok m tbl T p -> wreads_ok m tbl wtbl T p p -> p < length T ->
  kv_fn (nth p T 0) (read_kv m tbl p) (read_kv m wtbl p) = kv_at T p.
Proof.
  intros m tbl wtbl T p Hs [Hw Hnw] Hp. rewrite (read_kv_ok m tbl T p p) by (auto; lia).
  unfold kv_at. destruct (Bool.bool_dec window_local true) as [Ew|Ew].
  - apply (window_kv_fn Ew).
    + unfold read_kv. rewrite map_length, seq_length, length_kv_seq_firstn by lia. reflexivity.
    + intros q Hq. unfold read_kv in Hq. rewrite map_length, seq_length in Hq.
      apply (window_view_agrees m wtbl T p (window_first p)); [lia| |exact Hq].
      intros q' Hq' Hf. apply Hw; auto.
  - apply Bool.not_true_is_false in Ew. rewrite (Hnw Ew). rewrite (read_kv_ok m tbl T p p) by (auto; lia).
    reflexivity.
Qed.

Lemma logits_are_F_D : forall m tbl wtbl T p,
  slots_ok m tbl T (S p) -> wreads_ok m tbl wtbl T p (S p) -> p < length T ->
  logits_fn (nth p T 0) (read_kv m tbl (S p)) (read_kv m wtbl (S p)) = F_D (firstn (S p) T).
Proof.
  intros m tbl wtbl T p Hs [Hw Hnw] Hp. unfold F_D. rewrite (read_kv_ok m tbl T (S p) (S p)) by (auto; lia).
  replace (last (firstn (S p) T) 0) with (nth p T 0)
    by (rewrite (firstn_S_nth _ T p 0) by lia; rewrite last_last; reflexivity).
  destruct (Bool.bool_dec window_local true) as [Ew|Ew].
  - apply (window_logits_fn Ew).
    + unfold read_kv. rewrite map_length, seq_length, length_kv_seq_firstn by lia. reflexivity.
    + intros q Hq. unfold read_kv in Hq. rewrite map_length, seq_length in Hq.
      apply (window_view_agrees m wtbl T (S p) (window_first p)); [lia| |].
      * intros q' Hq' Hf. apply Hw; auto.
      * replace (S p - 1) with p in Hq by lia. exact Hq.
  - apply Bool.not_true_is_false in Ew. rewrite (Hnw Ew). rewrite (read_kv_ok m tbl T (S p) (S p)) by (auto; lia).
    reflexivity.
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

(* Window-table positions below n whose entry is held (not released, present) read the
   KV of their own prefix. *)
Definition wslots_ok (m : Mem) (r : Request) (T : list Token) (n : nat) : Prop :=
  forall q, q < n -> window_released r <= q / block_size ->
    q / block_size < length (window_table r) -> read m (window_table r) q = Some (kv_at T q).

(* Per request: its computed positions read exactly kv_at through its table; blocks it
   may still write (not fully computed) are private to it (ref count 1, not cached). The
   same for the held entries of its window table, whose released entries all lie before
   first_window_block of the computed positions. *)
Record req_inv (m : Mem) (cp : BlockId -> option (list Token)) (rc : BlockId -> nat)
               (r : Request) : Prop := {
  ri_computed_tokens : num_computed r <= length (tokens r);
  ri_computed_table : num_computed r <= length (block_table r) * block_size;
  ri_slots : slots_ok m (block_table r) (tokens r) (num_computed r);
  ri_private : forall j b, nth_error (block_table r) j = Some b ->
                 num_computed r < (j + 1) * block_size -> cp b = None /\ rc b = 1;
  ri_outputs : outputs_ok r;
  ri_wrel : window_released r <= first_window_block (num_computed r);
  ri_wrel_len : window_released r <= length (window_table r);
  ri_wslots : wslots_ok m r (tokens r) (num_computed r);
  ri_wprivate : forall j b, window_released r <= j -> nth_error (window_table r) j = Some b ->
                  num_computed r < (j + 1) * block_size -> cp b = None /\ rc b = 1;
  ri_wnone : window_local = false -> window_table r = [] /\ window_released r = 0
}.

(* Every cached block is a full block holding exactly the KV of its stored prefix. *)
Definition cached_ok (m : Mem) (cp : BlockId -> option (list Token)) : Prop :=
  forall b pre, cp b = Some pre ->
    exists j, length pre = (j + 1) * block_size /\
      forall o, o < block_size -> m b o = Some (kv_at pre (j * block_size + o)).

(* How many table entries (block tables and held window entries) hold block b. *)
Definition held_of (reqs : nat -> option Request) (ids : list nat) (b : BlockId) : nat :=
  sumf (fun x => match reqs x with Some r => occ (held r) b | None => 0 end) ids.

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
  held_of (upd reqs x (Some r')) ids b + occ (held r) b =
  held_of reqs ids b + occ (held r') b.
Proof.
  intros reqs ids x r r' b Hnd Hin Hx. unfold held_of.
  set (f := fun y => match reqs y with Some r0 => occ (held r0) b | None => 0 end).
  set (g := fun y => match upd reqs x (Some r') y with
                     | Some r0 => occ (held r0) b | None => 0 end).
  replace (occ (held r) b) with (f x) by (unfold f; rewrite Hx; reflexivity).
  replace (occ (held r') b) with (g x) by (unfold g; rewrite upd_eq; reflexivity).
  apply sumf_update; auto. intros y Hy. unfold f, g. rewrite upd_neq; auto.
Qed.

(* A block with ref count 1 is held by one table, once. *)
Lemma exclusive : forall s x r y r' b,
  inv s -> requests s x = Some r -> In b (held r) -> ref_count s b = 1 ->
  requests s y = Some r' -> In b (held r') ->
  y = x /\ occ (held r) b = 1.
Proof.
  intros s x r y r' b Hinv Hx Hb Hrc Hy Hb'.
  set (f := fun z => match requests s z with Some r0 => occ (held r0) b | None => 0 end).
  assert (Hs : sumf f (request_ids s) = 1).
  { rewrite <- Hrc, (inv_ref_count _ Hinv). reflexivity. }
  assert (Hxi : In x (request_ids s)) by (apply (inv_ids _ Hinv); congruence).
  assert (Hyi : In y (request_ids s)) by (apply (inv_ids _ Hinv); congruence).
  assert (Hfx : f x = occ (held r) b) by (unfold f; rewrite Hx; reflexivity).
  assert (Hfy : f y = occ (held r') b) by (unfold f; rewrite Hy; reflexivity).
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
  (forall j b, window_released r <= j -> nth_error (window_table r) j = Some b ->
               num_computed r < (j + 1) * block_size ->
               cp b = None -> rc b = 1 -> cp' b = None /\ rc' b = 1) ->
  req_inv m cp' rc' r.
Proof.
  intros m cp rc cp' rc' r Hr Hf Hfw. destruct Hr. constructor; auto.
  - intros j b Hj Hlt. destruct (ri_private0 j b Hj Hlt). apply (Hf j); auto.
  - intros j b Hr Hj Hlt. destruct (ri_wprivate0 j b Hr Hj Hlt). apply (Hfw j); auto.
Qed.

Lemma in_held_table : forall r j b, nth_error (block_table r) j = Some b -> In b (held r).
Proof. intros r j b H. unfold held. apply in_or_app. left. eapply nth_error_In; eauto. Qed.

Lemma nth_error_held_window : forall r j b, window_released r <= j ->
  nth_error (window_table r) j = Some b ->
  nth_error (skipn (window_released r) (window_table r)) (j - window_released r) = Some b.
Proof. intros r j b Hj H. rewrite nth_error_skipn_add. replace (window_released r + (j - window_released r)) with j by lia. exact H. Qed.

Lemma in_held_window : forall r j b, window_released r <= j ->
  nth_error (window_table r) j = Some b -> In b (held r).
Proof.
  intros r j b Hj H. unfold held. apply in_or_app. right.
  eapply nth_error_In. apply nth_error_held_window; eauto.
Qed.

(* A block held once sits at one entry of one of the request's tables. *)
Lemma held_once_table : forall r b j j', occ (held r) b = 1 ->
  nth_error (block_table r) j = Some b -> nth_error (block_table r) j' = Some b -> j = j'.
Proof.
  intros r b j j' H Hj Hj'. apply (occ_one_index (block_table r) b); auto.
  unfold held in H. rewrite occ_app in H. pose proof (occ_In _ _ (nth_error_In _ _ Hj)). lia.
Qed.

Lemma held_once_window : forall r b j j', occ (held r) b = 1 ->
  window_released r <= j -> nth_error (window_table r) j = Some b ->
  window_released r <= j' -> nth_error (window_table r) j' = Some b -> j = j'.
Proof.
  intros r b j j' H Hr Hj Hr' Hj'.
  pose proof (nth_error_held_window r j b Hr Hj) as E. pose proof (nth_error_held_window r j' b Hr' Hj') as E'.
  assert (j - window_released r = j' - window_released r); [|lia].
  apply (occ_one_index (skipn (window_released r) (window_table r)) b); auto.
  unfold held in H. rewrite occ_app in H. pose proof (occ_In _ _ (nth_error_In _ _ E)). lia.
Qed.

Lemma held_once_both : forall r b j j', occ (held r) b = 1 ->
  nth_error (block_table r) j = Some b ->
  window_released r <= j' -> nth_error (window_table r) j' = Some b -> False.
Proof.
  intros r b j j' H Hj Hr Hj'. pose proof (occ_two (block_table r) (skipn (window_released r) (window_table r)) b
    (nth_error_In _ _ Hj) (nth_error_In _ _ (nth_error_held_window r j' b Hr Hj'))). unfold held in H. unfold BlockId in *. lia.
Qed.

Lemma fwb_mono : forall c c', c <= c' -> first_window_block c <= first_window_block c'.
Proof. intros c c' H. unfold first_window_block. apply Nat.div_le_mono; [exact block_size_pos|lia]. Qed.

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
  inv (mkState (upd (requests s) x (Some (mkRequest p ss [] [] 0 [] false [] [] 0)))
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
      * intros q Hq; lia.
      * intros j b _ Hj; destruct j; discriminate.
      * intros _; split; reflexivity.
    + rewrite upd_neq in Hy by auto. apply (inv_requests _ Hinv _ _ Hy).
Qed.

Lemma occ_held_set_table : forall r tbl nc fin b,
  occ (held (set_table r tbl nc fin)) b = occ tbl b + occ (skipn (window_released r) (window_table r)) b.
Proof. intros. unfold held. simpl. apply occ_app. Qed.

Lemma occ_held : forall r b,
  occ (held r) b = occ (block_table r) b + occ (skipn (window_released r) (window_table r)) b.
Proof. intros. unfold held. apply occ_app. Qed.

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
    rewrite occ_held_set_table, occ_app, occ_single, occ_held in Hh.
    pose proof (inv_ref_count _ Hinv b'). unfold upd at 1.
    destruct (Nat.eq_dec b b') as [->|Hne].
    + rewrite Nat.eqb_refl. lia.
    + apply not_eq_sym, Nat.eqb_neq in Hne as Hne'. rewrite Hne'. lia.
  - intros b' pre Hc. destruct (Nat.eq_dec b' b) as [->|Hne].
    + rewrite upd_eq in Hc; discriminate.
    + rewrite upd_neq in Hc by auto. apply (inv_cached _ Hinv _ _ Hc).
  - intros y ry Hy. destruct (Nat.eq_dec y x) as [->|Hne].
    + rewrite upd_eq in Hy. inversion Hy; subst ry; clear Hy.
      destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho Hwr Hwl Hws Hwp Hwn].
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
      * intros j b' Hr' Hj Hlt. destruct (Hwp j b' Hr' Hj Hlt) as [Hc Hr].
        pose proof (Hpriv b' Hr). rewrite !upd_neq by auto. auto.
    + rewrite upd_neq in Hy by auto.
      apply (req_inv_frame _ _ _ _ _ _ (inv_requests _ Hinv _ _ Hy)).
      * intros j' b' _ _ Hc Hr. pose proof (Hpriv b' Hr). rewrite !upd_neq by auto. auto.
      * intros j' b' _ _ _ Hc Hr. pose proof (Hpriv b' Hr). rewrite !upd_neq by auto. auto.
Qed.

Lemma inv_hit : forall s x r b,
  inv s -> requests s x = Some r ->
  num_computed r = length (block_table r) * block_size ->
  (length (block_table r) + 1) * block_size <= length (tokens r) ->
  length (window_table r) <= length (block_table r) ->
  cached_prefix s b = Some (firstn ((length (block_table r) + 1) * block_size) (tokens r)) ->
  inv (mkState (upd (requests s) x (Some (set_table r (block_table r ++ [b])
                                   ((length (block_table r) + 1) * block_size) false)))
               (request_ids s) (kv_mem s) (upd (ref_count s) b (S (ref_count s b)))
               (cached_prefix s) (key_map s)).
Proof.
  intros s x r b Hinv Hx Hnc Hlen Hwlen Hcp.
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
    rewrite occ_held_set_table, occ_app, occ_single, occ_held in Hh.
    pose proof (inv_ref_count _ Hinv b'). unfold upd at 1.
    destruct (Nat.eq_dec b b') as [->|Hne].
    + rewrite Nat.eqb_refl. lia.
    + apply not_eq_sym, Nat.eqb_neq in Hne as Hne'. rewrite Hne'. lia.
  - apply (inv_cached _ Hinv).
  - intros y ry Hy. destruct (Nat.eq_dec y x) as [->|Hne].
    + rewrite upd_eq in Hy. inversion Hy; subst ry; clear Hy.
      destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho Hwr Hwl Hws Hwp Hwn].
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
      * pose proof (fwb_mono (num_computed r) ((L + 1) * block_size)). lia.
      * intros q Hq Hr' Hl. cbn in Hq, Hr', Hl. unfold wslots_ok in Hws. cbn. apply Hws; auto.
        assert (q / block_size < L) by lia.
        assert (q < L * block_size); [|lia].
        pose proof (pos_lt_block_end block_size q block_size_pos).
        assert ((q / block_size + 1) * block_size <= L * block_size) by (apply Nat.mul_le_mono_r; lia). lia.
      * intros j b' Hr' Hj Hlt. cbn in Hr', Hj, Hlt.
        assert (j < length (window_table r)) by (apply nth_error_Some; congruence).
        assert ((j + 1) * block_size <= L * block_size) by (apply Nat.mul_le_mono_r; lia).
        destruct (Hwp j b' Hr' Hj ltac:(lia)) as [Hc Hr]. pose proof (Hpriv b' Hc).
        rewrite upd_neq by auto. auto.
    + rewrite upd_neq in Hy by auto.
      apply (req_inv_frame _ _ _ _ _ _ (inv_requests _ Hinv _ _ Hy)).
      * intros j' b' _ _ Hc Hr. pose proof (Hpriv b' Hc). rewrite !upd_neq by auto. auto.
      * intros j' b' _ _ _ Hc Hr. pose proof (Hpriv b' Hc). rewrite !upd_neq by auto. auto.
Qed.

Lemma inv_register : forall s x r j b,
  inv s -> requests s x = Some r -> nth_error (block_table r) j = Some b ->
  (j + 1) * block_size <= num_computed r ->
  inv (mkState (requests s) (request_ids s) (kv_mem s) (ref_count s)
               (upd (cached_prefix s) b (Some (firstn ((j + 1) * block_size) (tokens r))))
               (upd (key_map s) (hash (firstn ((j + 1) * block_size) (tokens r))) (Some b))).
Proof.
  intros s x r j b Hinv Hx Hj Hfull.
  destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho Hwr Hwl Hws Hwp Hwn].
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
    + intros j' b' Hj' Hlt Hc Hr. split; auto.
      destruct (Nat.eq_dec b' b) as [->|Hne]; [|rewrite upd_neq; auto].
      (* b is private to y, so y = x and b sits at one index: j = j', not fully computed *)
      exfalso.
      destruct (exclusive s y ry x r b Hinv Hy (in_held_table _ _ _ Hj') Hr Hx (in_held_table _ _ _ Hj))
        as [-> Hocc].
      rewrite Hx in Hy. inversion Hy; subst ry.
      pose proof (held_once_table _ _ _ _ Hocc Hj Hj'). subst j'. lia.
    + intros j' b' Hr' Hj' Hlt Hc Hr. split; auto.
      destruct (Nat.eq_dec b' b) as [->|Hne]; [|rewrite upd_neq; auto].
      exfalso.
      destruct (exclusive s y ry x r b Hinv Hy (in_held_window _ _ _ Hr' Hj') Hr Hx (in_held_table _ _ _ Hj))
        as [-> Hocc].
      rewrite Hx in Hy. inversion Hy; subst ry.
      apply (held_once_both _ _ _ _ Hocc Hj Hr' Hj').
Qed.

Lemma inv_release : forall s x r fin,
  inv s -> requests s x = Some r ->
  inv (mkState (upd (requests s) x (Some (release_tables r fin)))
               (request_ids s) (kv_mem s)
               (fun b => ref_count s b - occ (held r) b)
               (cached_prefix s) (key_map s)).
Proof.
  intros s x r fin Hinv Hx.
  assert (Hxi : In x (request_ids s)) by (apply (inv_ids _ Hinv); congruence).
  constructor; simpl.
  - apply (inv_nodup _ Hinv).
  - apply ids_upd; auto.
  - intros b. pose proof (held_of_upd (requests s) (request_ids s) x r (release_tables r fin) b
        (inv_nodup _ Hinv) Hxi Hx) as Hh.
    pose proof (inv_ref_count _ Hinv b). unfold held at 2 in Hh. simpl in Hh. lia.
  - apply (inv_cached _ Hinv).
  - intros y ry Hy. destruct (Nat.eq_dec y x) as [->|Hne].
    + rewrite upd_eq in Hy. inversion Hy; subst ry; clear Hy.
      destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho Hwr Hwl Hws Hwp Hwn].
      constructor; simpl; try lia.
      * intros q Hq; lia.
      * intros j b Hj; destruct j; discriminate.
      * exact Ho.
      * intros q Hq; lia.
      * intros j b _ Hj; destruct j; discriminate.
      * intros _; split; reflexivity.
    + rewrite upd_neq in Hy by auto.
      assert (Hfr : forall b, In b (held ry) -> ref_count s b = 1 ->
                      ref_count s b - occ (held r) b = 1).
      { intros b Hb Hr. destruct (in_dec Nat.eq_dec b (held r)) as [Hin|Hnin].
        - exfalso. destruct (exclusive s y ry x r b Hinv Hy Hb Hr Hx Hin). congruence.
        - apply (count_occ_not_In Nat.eq_dec) in Hnin. unfold occ. rewrite Hnin. lia. }
      apply (req_inv_frame _ _ _ _ _ _ (inv_requests _ Hinv _ _ Hy)).
      * intros j b Hj _ Hc Hr. split; auto. apply Hfr; auto. eapply in_held_table; eauto.
      * intros j b Hr' Hj _ Hc Hr. split; auto. apply Hfr; auto. eapply in_held_window; eauto.
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
    simpl in Hh. pose proof (inv_ref_count _ Hinv b). unfold held in Hh. simpl in Hh. lia.
  - apply (inv_cached _ Hinv).
  - intros y ry Hy. destruct (Nat.eq_dec y x) as [->|Hne].
    + rewrite upd_eq in Hy. inversion Hy; subst ry; clear Hy.
      destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho Hwr Hwl Hws Hwp Hwn].
      constructor; [exact Ht|exact Htb|exact Hs|exact Hp|exact Ho|exact Hwr|exact Hwl|exact Hws|exact Hwp|exact Hwn].
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
  destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho Hwr Hwl Hws Hwp Hwn].
  assert (Hocc : forall b, occ (held r) b =
                   occ (firstn n (block_table r)) b + occ (skipn n (block_table r)) b
                   + occ (skipn (window_released r) (window_table r)) b).
  { intros b. rewrite occ_held, <- (occ_app (firstn n _)), firstn_skipn. reflexivity. }
  assert (Hin_skip : forall b, In b (skipn n (block_table r)) -> In b (held r)).
  { intros b H. unfold held. apply in_or_app. left. eapply In_skipn_In; eauto. }
  constructor; simpl.
  - apply (inv_nodup _ Hinv).
  - apply ids_upd; auto.
  - intros b. pose proof (held_of_upd (requests s) (request_ids s) x r
        (set_table r (firstn n (block_table r)) (num_computed r) false) b
        (inv_nodup _ Hinv) Hxi Hx) as Hh.
    rewrite occ_held_set_table in Hh. pose proof (inv_ref_count _ Hinv b). specialize (Hocc b). lia.
  - apply (inv_cached _ Hinv).
  - intros y ry Hy. destruct (Nat.eq_dec y x) as [->|Hne].
    + rewrite upd_eq in Hy. inversion Hy; subst ry; clear Hy.
      constructor; simpl; auto.
      * rewrite firstn_length. destruct (Nat.min_spec n (length (block_table r))) as [[_ ->]|[_ ->]]; lia.
      * intros q Hq. rewrite read_firstn by lia. apply Hs; auto.
      * intros j b Hj Hlt. destruct (nth_error_firstn_some _ _ _ _ _ Hj) as [Hjn Hj'].
        destruct (Hp j b Hj' Hlt) as [Hc Hr]. split; auto.
        destruct (exclusive s x r x r b Hinv Hx (in_held_table _ _ _ Hj') Hr Hx (in_held_table _ _ _ Hj'))
          as [_ H1].
        pose proof (occ_In _ _ (nth_error_In _ _ Hj)). specialize (Hocc b). lia.
      * intros j b Hr' Hj Hlt. destruct (Hwp j b Hr' Hj Hlt) as [Hc Hr]. split; auto.
        destruct (exclusive s x r x r b Hinv Hx (in_held_window _ _ _ Hr' Hj) Hr Hx (in_held_window _ _ _ Hr' Hj))
          as [_ H1].
        pose proof (occ_In _ _ (nth_error_In _ _ (nth_error_held_window _ _ _ Hr' Hj))).
        specialize (Hocc b). lia.
    + rewrite upd_neq in Hy by auto.
      assert (Hfr : forall b, In b (held ry) -> ref_count s b = 1 ->
                      ref_count s b - occ (skipn n (block_table r)) b = 1).
      { intros b Hb Hr. destruct (in_dec Nat.eq_dec b (skipn n (block_table r))) as [Hin|Hnin].
        - exfalso. destruct (exclusive s y ry x r b Hinv Hy Hb Hr Hx (Hin_skip _ Hin)). congruence.
        - apply (count_occ_not_In Nat.eq_dec) in Hnin. unfold occ. rewrite Hnin. lia. }
      apply (req_inv_frame _ _ _ _ _ _ (inv_requests _ Hinv _ _ Hy)).
      * intros j b Hj _ Hc Hr. split; auto. apply Hfr; auto. eapply in_held_table; eauto.
      * intros j b Hr' Hj _ Hc Hr. split; auto. apply Hfr; auto. eapply in_held_window; eauto.
Qed.

(* ---------------- window-local KV: the window table's transitions ---------------- *)

(* What the release keeps (C++ BlockPool::release_leading up to first_window_block c): a
   released entry j ends at or before c - W, so (j + 1) * B + W <= c + 1: no query at c or
   later reads it (the guard docs/SPEC.md section 4 states). *)
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

Lemma lt_of_div_lt : forall q n, q / block_size < n -> q < n * block_size.
Proof.
  intros q n H. pose proof (pos_lt_block_end block_size q block_size_pos).
  assert ((q / block_size + 1) * block_size <= n * block_size) by (apply Nat.mul_le_mono_r; lia). lia.
Qed.

Lemma tokens_set_window : forall r w n, tokens (set_window r w n) = tokens r.
Proof. reflexivity. Qed.

Lemma occ_held_window_snoc : forall r b b',
  window_released r <= length (window_table r) ->
  occ (held (set_window r (window_table r ++ [b]) (window_released r))) b' = occ (held r) b' + occ [b] b'.
Proof.
  intros r b b' Hl. unfold held. simpl. rewrite skipn_app_le by exact Hl. rewrite app_assoc, occ_app. reflexivity.
Qed.

Lemma inv_window_allocate : forall s x r b,
  inv s -> window_local = true -> requests s x = Some r -> ref_count s b = 0 ->
  num_computed r <= length (window_table r) * block_size ->
  inv (mkState (upd (requests s) x (Some (set_window r (window_table r ++ [b]) (window_released r))))
               (request_ids s) (kv_mem s) (upd (ref_count s) b 1)
               (upd (cached_prefix s) b None) (key_map s)).
Proof.
  intros s x r b Hinv Ew Hx Hb Hcov.
  assert (Hxi : In x (request_ids s)) by (apply (inv_ids _ Hinv); congruence).
  assert (Hpriv : forall b', ref_count s b' = 1 -> b' <> b) by (intros b' H1 ->; lia).
  destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho Hwr Hwl Hws Hwp Hwn].
  constructor; simpl.
  - apply (inv_nodup _ Hinv).
  - apply ids_upd; auto.
  - intros b'. pose proof (held_of_upd (requests s) (request_ids s) x r
        (set_window r (window_table r ++ [b]) (window_released r)) b'
        (inv_nodup _ Hinv) Hxi Hx) as Hh.
    rewrite occ_held_window_snoc, occ_single in Hh by exact Hwl.
    pose proof (inv_ref_count _ Hinv b'). unfold upd at 1.
    destruct (Nat.eq_dec b b') as [->|Hne].
    + rewrite Nat.eqb_refl. lia.
    + apply not_eq_sym, Nat.eqb_neq in Hne as Hne'. rewrite Hne'. lia.
  - intros b' pre Hc. destruct (Nat.eq_dec b' b) as [->|Hne].
    + rewrite upd_eq in Hc; discriminate.
    + rewrite upd_neq in Hc by auto. apply (inv_cached _ Hinv _ _ Hc).
  - intros y ry Hy. destruct (Nat.eq_dec y x) as [->|Hne].
    + rewrite upd_eq in Hy. inversion Hy; subst ry; clear Hy.
      constructor; simpl.
      * exact Ht.
      * exact Htb.
      * exact Hs.
      * intros j b' Hj Hlt. destruct (Hp j b' Hj Hlt) as [Hc Hr].
        pose proof (Hpriv b' Hr). rewrite !upd_neq by auto. auto.
      * exact Ho.
      * exact Hwr.
      * rewrite app_length. simpl. lia.
      * intros q Hq Hr Hl. simpl in Hq, Hr, Hl |- *. rewrite app_length in Hl. simpl in Hl.
        destruct (Nat.lt_ge_cases (q / block_size) (length (window_table r))) as [Hlt|Hge].
        -- rewrite read_app by (apply lt_of_div_lt; auto). apply Hws; auto.
        -- exfalso. pose proof (block_start_le block_size q block_size_pos).
           assert (length (window_table r) * block_size <= q / block_size * block_size)
             by (apply Nat.mul_le_mono_r; lia). lia.
      * intros j b' Hr Hj Hlt. simpl in Hr, Hj, Hlt |- *.
        destruct (Nat.lt_ge_cases j (length (window_table r))) as [Hl|Hl].
        -- rewrite nth_error_app1 in Hj by auto. destruct (Hwp j b' Hr Hj Hlt) as [Hc Hrc].
           pose proof (Hpriv b' Hrc). rewrite !upd_neq by auto. auto.
        -- rewrite nth_error_app2 in Hj by auto.
           destruct (j - length (window_table r)) as [|k]; simpl in Hj; [|destruct k; discriminate].
           inversion Hj; subst. rewrite !upd_eq. auto.
      * intros E. congruence.
    + rewrite upd_neq in Hy by auto.
      apply (req_inv_frame _ _ _ _ _ _ (inv_requests _ Hinv _ _ Hy)).
      * intros j' b' _ _ Hc Hr. pose proof (Hpriv b' Hr). rewrite !upd_neq by auto. auto.
      * intros j' b' _ _ _ Hc Hr. pose proof (Hpriv b' Hr). rewrite !upd_neq by auto. auto.
Qed.

Lemma inv_window_hit : forall s x r b,
  inv s -> window_local = true -> requests s x = Some r ->
  (length (window_table r) + 1) * block_size <= num_computed r ->
  cached_prefix s b = Some (firstn ((length (window_table r) + 1) * block_size) (tokens r)) ->
  inv (mkState (upd (requests s) x (Some (set_window r (window_table r ++ [b]) (window_released r))))
               (request_ids s) (kv_mem s) (upd (ref_count s) b (S (ref_count s b)))
               (cached_prefix s) (key_map s)).
Proof.
  intros s x r b Hinv Ew Hx Hcov Hcp.
  set (L := length (window_table r)) in *.
  assert (Hxi : In x (request_ids s)) by (apply (inv_ids _ Hinv); congruence).
  assert (Hpriv : forall b', cached_prefix s b' = None -> b' <> b) by congruence.
  destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho Hwr Hwl Hws Hwp Hwn].
  constructor; simpl.
  - apply (inv_nodup _ Hinv).
  - apply ids_upd; auto.
  - intros b'. pose proof (held_of_upd (requests s) (request_ids s) x r
        (set_window r (window_table r ++ [b]) (window_released r)) b'
        (inv_nodup _ Hinv) Hxi Hx) as Hh.
    rewrite occ_held_window_snoc, occ_single in Hh by exact Hwl.
    pose proof (inv_ref_count _ Hinv b'). unfold upd at 1.
    destruct (Nat.eq_dec b b') as [->|Hne].
    + rewrite Nat.eqb_refl. lia.
    + apply not_eq_sym, Nat.eqb_neq in Hne as Hne'. rewrite Hne'. lia.
  - apply (inv_cached _ Hinv).
  - intros y ry Hy. destruct (Nat.eq_dec y x) as [->|Hne].
    + rewrite upd_eq in Hy. inversion Hy; subst ry; clear Hy.
      constructor; simpl.
      * exact Ht.
      * exact Htb.
      * exact Hs.
      * intros j b' Hj Hlt. destruct (Hp j b' Hj Hlt) as [Hc Hr].
        pose proof (Hpriv b' Hc). rewrite !upd_neq by auto. auto.
      * exact Ho.
      * exact Hwr.
      * rewrite app_length. simpl. lia.
      * intros q Hq Hr Hl. simpl in Hq, Hr, Hl |- *. rewrite app_length in Hl. simpl in Hl. fold L in Hl.
        destruct (Nat.lt_ge_cases (q / block_size) L) as [Hlt|Hge].
        -- rewrite read_app by (apply lt_of_div_lt; auto). apply Hws; auto.
        -- (* q is in the hit block: slot q mod B of b holds kv_at of the stored prefix *)
           assert (HqL : q / block_size = L) by lia.
           destruct (inv_cached _ Hinv _ _ Hcp) as [j [Hj Hslots]].
           rewrite firstn_length, Nat.min_l in Hj by lia.
           assert (j = L) by (apply Nat.mul_cancel_r in Hj; [lia|exact block_size_pos]). subst j.
           unfold read. rewrite HqL, nth_error_app2 by lia. rewrite Nat.sub_diag. simpl.
           pose proof (Nat.mod_upper_bound q block_size block_size_pos) as Hmod.
           rewrite Hslots by auto. f_equal.
           assert (Eq : L * block_size + q mod block_size = q)
             by (rewrite <- HqL; rewrite Nat.mul_comm; symmetry; apply Nat.div_mod_eq).
           rewrite Eq, ?tokens_set_window. apply kv_at_firstn; [|lia].
           pose proof (lt_of_div_lt q (L + 1) ltac:(lia)). lia.
      * intros j b' Hr Hj Hlt. simpl in Hr, Hj, Hlt |- *.
        destruct (Nat.lt_ge_cases j L) as [Hl|Hl].
        -- rewrite nth_error_app1 in Hj by auto. destruct (Hwp j b' Hr Hj Hlt) as [Hc Hrc].
           pose proof (Hpriv b' Hc). rewrite !upd_neq by auto. auto.
        -- exfalso. assert (j < L + 1).
           { assert (j < length (window_table r ++ [b])) by (apply nth_error_Some; congruence).
             rewrite app_length in H; simpl in H; fold L in H; lia. }
           assert ((j + 1) * block_size <= (L + 1) * block_size) by (apply Nat.mul_le_mono_r; lia).
           lia.
      * intros E. congruence.
    + rewrite upd_neq in Hy by auto.
      apply (req_inv_frame _ _ _ _ _ _ (inv_requests _ Hinv _ _ Hy)).
      * intros j' b' _ _ Hc Hr. pose proof (Hpriv b' Hc). rewrite !upd_neq by auto. auto.
      * intros j' b' _ _ _ Hc Hr. pose proof (Hpriv b' Hc). rewrite !upd_neq by auto. auto.
Qed.

Lemma inv_window_hole : forall s x r,
  inv s -> window_local = true -> requests s x = Some r ->
  window_released r = length (window_table r) ->
  length (window_table r) < first_window_block (num_computed r) ->
  inv (mkState (upd (requests s) x (Some (set_window r (window_table r ++ [0]) (S (window_released r)))))
               (request_ids s) (kv_mem s) (ref_count s) (cached_prefix s) (key_map s)).
Proof.
  intros s x r Hinv Ew Hx Hrel Hlt.
  assert (Hxi : In x (request_ids s)) by (apply (inv_ids _ Hinv); congruence).
  destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho Hwr Hwl Hws Hwp Hwn].
  assert (E : held (set_window r (window_table r ++ [0]) (S (window_released r))) = held r).
  { unfold held, set_window. cbn [window_table window_released block_table]. rewrite Hrel.
    rewrite (skipn_all2 (window_table r ++ [0])) by (rewrite app_length; simpl; lia).
    rewrite (skipn_all2 (window_table r)) by lia. reflexivity. }
  constructor; simpl.
  - apply (inv_nodup _ Hinv).
  - apply ids_upd; auto.
  - intros b'. pose proof (held_of_upd (requests s) (request_ids s) x r
        (set_window r (window_table r ++ [0]) (S (window_released r))) b'
        (inv_nodup _ Hinv) Hxi Hx) as Hh.
    rewrite E in Hh. pose proof (inv_ref_count _ Hinv b'). lia.
  - apply (inv_cached _ Hinv).
  - intros y ry Hy. destruct (Nat.eq_dec y x) as [->|Hne].
    + rewrite upd_eq in Hy. inversion Hy; subst ry; clear Hy.
      constructor; simpl.
      * exact Ht.
      * exact Htb.
      * exact Hs.
      * exact Hp.
      * exact Ho.
      * lia.
      * rewrite app_length. simpl. lia.
      * intros q Hq Hr Hl. simpl in Hq, Hr, Hl. rewrite app_length in Hl. simpl in Hl. lia.
      * intros j b' Hr Hj Hlt'. simpl in Hr, Hj, Hlt'. exfalso.
        assert (j < length (window_table r ++ [0])) by (apply nth_error_Some; congruence).
        rewrite app_length in H. simpl in H. lia.
      * intros E'. congruence.
    + rewrite upd_neq in Hy by auto. apply (inv_requests _ Hinv _ _ Hy).
Qed.

Lemma inv_window_register : forall s x r j b,
  inv s -> requests s x = Some r -> window_released r <= j -> nth_error (window_table r) j = Some b ->
  (j + 1) * block_size <= num_computed r ->
  inv (mkState (requests s) (request_ids s) (kv_mem s) (ref_count s)
               (upd (cached_prefix s) b (Some (firstn ((j + 1) * block_size) (tokens r))))
               (key_map s)).
Proof.
  intros s x r j b Hinv Hx Hjr Hj Hfull.
  destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho Hwr Hwl Hws Hwp Hwn].
  assert (HjL : j < length (window_table r)) by (apply nth_error_Some; congruence).
  constructor; simpl.
  - apply (inv_nodup _ Hinv).
  - apply (inv_ids _ Hinv).
  - apply (inv_ref_count _ Hinv).
  - intros b' pre Hc. destruct (Nat.eq_dec b' b) as [->|Hne].
    + rewrite upd_eq in Hc. inversion Hc; subst pre; clear Hc.
      exists j. split.
      * rewrite firstn_length, Nat.min_l; lia.
      * intros o Hob.
        assert (Hq : j * block_size + o < num_computed r) by (rewrite Nat.mul_add_distr_r in Hfull; lia).
        assert (Hd : (j * block_size + o) / block_size = j) by (apply div_of_block_offset; auto).
        pose proof (Hws _ Hq ltac:(rewrite Hd; exact Hjr) ltac:(rewrite Hd; exact HjL)) as Hr.
        unfold read in Hr. rewrite Hd, mod_of_block_offset, Hj in Hr by auto.
        rewrite Hr. f_equal. symmetry. apply kv_at_firstn; [|lia].
        rewrite Nat.mul_add_distr_r. lia.
    + rewrite upd_neq in Hc by auto. apply (inv_cached _ Hinv _ _ Hc).
  - intros y ry Hy.
    apply (req_inv_frame _ _ _ _ _ _ (inv_requests _ Hinv _ _ Hy)).
    + intros j' b' Hj' Hlt Hc Hr. split; auto.
      destruct (Nat.eq_dec b' b) as [->|Hne]; [|rewrite upd_neq; auto].
      exfalso.
      destruct (exclusive s y ry x r b Hinv Hy (in_held_table _ _ _ Hj') Hr Hx (in_held_window _ _ _ Hjr Hj))
        as [-> Hocc].
      rewrite Hx in Hy. inversion Hy; subst ry.
      apply (held_once_both _ _ _ _ Hocc Hj' Hjr Hj).
    + intros j' b' Hr' Hj' Hlt Hc Hr. split; auto.
      destruct (Nat.eq_dec b' b) as [->|Hne]; [|rewrite upd_neq; auto].
      exfalso.
      destruct (exclusive s y ry x r b Hinv Hy (in_held_window _ _ _ Hr' Hj') Hr Hx (in_held_window _ _ _ Hjr Hj))
        as [-> Hocc].
      rewrite Hx in Hy. inversion Hy; subst ry.
      pose proof (held_once_window _ _ _ _ Hocc Hjr Hj Hr' Hj'). subst j'. lia.
Qed.

(* The window release: the first held entry lies before first_window_block of the computed
   positions, so no later query reads it (window_reads_of_inv); its block loses one holder. *)
Lemma inv_window_release : forall s x r b,
  inv s -> requests s x = Some r ->
  nth_error (window_table r) (window_released r) = Some b ->
  window_released r < first_window_block (num_computed r) ->
  inv (mkState (upd (requests s) x (Some (set_window r (window_table r) (S (window_released r)))))
               (request_ids s) (kv_mem s) (upd (ref_count s) b (ref_count s b - 1))
               (cached_prefix s) (key_map s)).
Proof.
  intros s x r b Hinv Hx Hb Hlt.
  assert (Hxi : In x (request_ids s)) by (apply (inv_ids _ Hinv); congruence).
  destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho Hwr Hwl Hws Hwp Hwn].
  set (r' := set_window r (window_table r) (S (window_released r))).
  assert (Eh : forall b', occ (held r) b' = occ (held r') b' + occ [b] b').
  { intros b'. unfold held, r', set_window. cbn [window_table window_released block_table].
    rewrite (skipn_nth_cons _ _ _ _ Hb).
    replace (b :: skipn (S (window_released r)) (window_table r))
      with ([b] ++ skipn (S (window_released r)) (window_table r)) by reflexivity.
    rewrite !occ_app. unfold BlockId in *. lia. }
  assert (Hbh : In b (held r)) by (apply (in_held_window r (window_released r)); auto).
  assert (Hrc1 : 1 <= ref_count s b).
  { rewrite (inv_ref_count _ Hinv b). unfold held_of.
    pose proof (sumf_le (fun x0 => match requests s x0 with Some r0 => occ (held r0) b | None => 0 end)
                  (request_ids s) x Hxi) as H. cbv beta in H. rewrite Hx in H. pose proof (occ_In _ _ Hbh). lia. }
  assert (Hnotb : forall b', ref_count s b' = 1 -> In b' (held r) ->
                    (forall j, nth_error (block_table r) j = Some b' -> False) ->
                    (forall j, S (window_released r) <= j -> nth_error (window_table r) j = Some b' -> False) ->
                    True) by auto.
  constructor; simpl.
  - apply (inv_nodup _ Hinv).
  - apply ids_upd; auto.
  - intros b'. pose proof (held_of_upd (requests s) (request_ids s) x r r' b'
        (inv_nodup _ Hinv) Hxi Hx) as Hh.
    rewrite Eh in Hh. rewrite occ_single in Hh.
    pose proof (inv_ref_count _ Hinv b'). unfold upd at 1.
    destruct (Nat.eq_dec b b') as [->|Hne].
    + rewrite Nat.eqb_refl. lia.
    + apply not_eq_sym, Nat.eqb_neq in Hne as Hne'. rewrite Hne'. lia.
  - apply (inv_cached _ Hinv).
  - intros y ry Hy. destruct (Nat.eq_dec y x) as [->|Hne].
    + rewrite upd_eq in Hy. inversion Hy; subst ry; clear Hy. unfold r'.
      constructor; simpl.
      * exact Ht.
      * exact Htb.
      * exact Hs.
      * intros j b' Hj Hlt'. destruct (Hp j b' Hj Hlt') as [Hc Hr]. split; auto.
        destruct (Nat.eq_dec b' b) as [->|Hne]; [|rewrite upd_neq; auto].
        exfalso. destruct (exclusive s x r x r b Hinv Hx Hbh Hr Hx Hbh) as [_ Hocc].
        apply (held_once_both _ _ _ _ Hocc Hj (le_n _) Hb).
      * exact Ho.
      * lia.
      * assert (window_released r < length (window_table r)) by (apply nth_error_Some; congruence). lia.
      * intros q Hq Hr Hl. simpl in Hq, Hr, Hl. apply Hws; auto. lia.
      * intros j b' Hr Hj Hlt'. simpl in Hr, Hj, Hlt'. destruct (Hwp j b' ltac:(lia) Hj Hlt') as [Hc Hrc].
        split; auto. destruct (Nat.eq_dec b' b) as [->|Hne]; [|rewrite upd_neq; auto].
        exfalso. destruct (exclusive s x r x r b Hinv Hx Hbh Hrc Hx Hbh) as [_ Hocc].
        pose proof (held_once_window r b (window_released r) j Hocc (le_n _) Hb ltac:(lia) Hj). lia.
      * intros E. exfalso. destruct (Hwn E) as [E1 _]. rewrite E1 in Hb. destruct (window_released r); discriminate.
    + rewrite upd_neq in Hy by auto.
      assert (Hfr : forall b', In b' (held ry) -> ref_count s b' = 1 ->
                      upd (ref_count s) b (ref_count s b - 1) b' = 1).
      { intros b' Hb' Hr. destruct (Nat.eq_dec b' b) as [->|Hne'].
        - exfalso. destruct (exclusive s y ry x r b Hinv Hy Hb' Hr Hx Hbh). congruence.
        - rewrite upd_neq; auto. }
      apply (req_inv_frame _ _ _ _ _ _ (inv_requests _ Hinv _ _ Hy)).
      * intros j b' Hj _ Hc Hr. split; auto. apply Hfr; auto. eapply in_held_table; eauto.
      * intros j b' Hr' Hj _ Hc Hr. split; auto. apply Hfr; auto. eapply in_held_window; eauto.
Qed.


(* The window table's roll-back: the dropped entries hold no computed position and no released
   entry, so they are held, private (held once, by this table): freeing them touches no other
   request and no cached block, and the kept entries read what they read before. *)
Lemma inv_window_truncate : forall s x r n,
  inv s -> window_local = true -> requests s x = Some r ->
  window_released r <= n -> num_computed r <= n * block_size ->
  inv (mkState (upd (requests s) x (Some (set_window r (firstn n (window_table r)) (window_released r))))
               (request_ids s) (kv_mem s)
               (fun b => ref_count s b - occ (skipn n (window_table r)) b)
               (cached_prefix s) (key_map s)).
Proof.
  intros s x r n Hinv Hwlocal Hx Hrn Hn.
  assert (Hxi : In x (request_ids s)) by (apply (inv_ids _ Hinv); congruence).
  destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho Hwr Hwl Hws Hwp Hwn].
  set (r' := set_window r (firstn n (window_table r)) (window_released r)).
  assert (Hocc : forall b, occ (held r) b = occ (held r') b + occ (skipn n (window_table r)) b).
  { intros b. unfold held, r', set_window. cbn [window_table window_released block_table].
    rewrite <- (skipn_firstn_skipn _ (window_table r) _ _ Hrn). rewrite !occ_app. lia. }
  assert (Hin_skip : forall b, In b (skipn n (window_table r)) -> In b (held r)).
  { intros b H. unfold held. apply in_or_app. right.
    rewrite <- (skipn_firstn_skipn _ (window_table r) _ _ Hrn). apply in_or_app. right. exact H. }
  constructor; simpl.
  - apply (inv_nodup _ Hinv).
  - apply ids_upd; auto.
  - intros b. pose proof (held_of_upd (requests s) (request_ids s) x r r' b
        (inv_nodup _ Hinv) Hxi Hx) as Hh.
    pose proof (inv_ref_count _ Hinv b). specialize (Hocc b). lia.
  - apply (inv_cached _ Hinv).
  - intros y ry Hy. destruct (Nat.eq_dec y x) as [->|Hne].
    + rewrite upd_eq in Hy. inversion Hy; subst ry; clear Hy.
      constructor.
      * exact Ht.
      * exact Htb.
      * exact Hs.
      * intros j b Hj Hlt. destruct (Hp j b Hj Hlt) as [Hc Hr]. split; auto.
        destruct (exclusive s x r x r b Hinv Hx (in_held_table r j b Hj) Hr Hx (in_held_table r j b Hj))
          as [_ H1].
        assert (Hb' : In b (held r')) by (apply (in_held_table r' j b); exact Hj).
        pose proof (occ_In _ _ Hb'). specialize (Hocc b). lia.
      * exact Ho.
      * exact Hwr.
      * cbn [r' set_window window_table window_released]. rewrite firstn_length.
        destruct (Nat.min_spec n (length (window_table r))) as [[_ ->]|[_ ->]]; lia.
      * intros q Hq Hr Hl. cbn [r' set_window window_table window_released num_computed] in *.
        rewrite read_firstn by lia. apply Hws; auto.
        rewrite firstn_length in Hl. destruct (Nat.min_spec n (length (window_table r))) as [[_ E]|[_ E]];
          rewrite E in Hl; lia.
      * intros j b Hr Hj Hlt. cbn [r' set_window window_table window_released num_computed] in *.
        destruct (nth_error_firstn_some _ _ _ _ _ Hj) as [Hjn Hj'].
        destruct (Hwp j b Hr Hj' Hlt) as [Hc Hrc]. split; auto.
        destruct (exclusive s x r x r b Hinv Hx (in_held_window _ _ _ Hr Hj') Hrc Hx (in_held_window _ _ _ Hr Hj'))
          as [_ H1].
        assert (Hb' : In b (held r')) by (apply (in_held_window r' j b); assumption).
        pose proof (occ_In _ _ Hb'). specialize (Hocc b). lia.
      * intros E. congruence.
    + rewrite upd_neq in Hy by auto.
      assert (Hfr : forall b, In b (held ry) -> ref_count s b = 1 ->
                      ref_count s b - occ (skipn n (window_table r)) b = 1).
      { intros b Hb Hr. destruct (in_dec Nat.eq_dec b (skipn n (window_table r))) as [Hin|Hnin].
        - exfalso. destruct (exclusive s y ry x r b Hinv Hy Hb Hr Hx (Hin_skip _ Hin)). congruence.
        - apply (count_occ_not_In Nat.eq_dec) in Hnin. unfold occ. rewrite Hnin. lia. }
      apply (req_inv_frame _ _ _ _ _ _ (inv_requests _ Hinv _ _ Hy)).
      * intros j b Hj _ Hc Hr. split; auto. apply Hfr; auto. eapply in_held_table; eauto.
      * intros j b Hr' Hj _ Hc Hr. split; auto. apply Hfr; auto. eapply in_held_window; eauto.
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
   num_computed + (its rows among the first k) read correctly through its block table and
   its held window entries; cached blocks intact. *)
Definition fold_inv (s : State) (batch : list Row) (k : nat) (m : Mem) : Prop :=
  cached_ok m (cached_prefix s) /\
  forall x r, requests s x = Some r ->
    slots_ok m (block_table r) (seq_of r) (num_computed r + cnt x (firstn k batch)) /\
    wslots_ok m r (seq_of r) (num_computed r + cnt x (firstn k batch)).

Lemma read_upd_other : forall m (b : BlockId) o v (tbl : list BlockId) q,
  (nth_error tbl (q / block_size) = Some b -> q mod block_size <> o) ->
  read (upd_mem m b o v) tbl q = read m tbl q.
Proof.
  intros m b o v tbl q H. unfold read.
  destruct (nth_error tbl (q / block_size)) as [b'|] eqn:E; [|reflexivity].
  unfold upd_mem. destruct (Nat.eq_dec b' b) as [->|Hne].
  - specialize (H eq_refl). apply Nat.eqb_neq in H. rewrite Nat.eqb_refl, H. reflexivity.
  - apply Nat.eqb_neq in Hne. rewrite Hne. reflexivity.
Qed.

Lemma read_upd_same : forall m (b : BlockId) v (tbl : list BlockId) q,
  nth_error tbl (q / block_size) = Some b -> read (upd_mem m b (q mod block_size) v) tbl q = Some v.
Proof. intros m b v tbl q H. unfold read. rewrite H. unfold upd_mem. cbv beta. rewrite !Nat.eqb_refl. reflexivity. Qed.

(* A write into slot o of block b that no covered position of any table reads keeps the
   mid-pass invariant. *)
Lemma fold_write_unread : forall s batch k m (b : BlockId) o v,
  fold_inv s batch k m ->
  cached_prefix s b = None ->
  (forall y ry q, requests s y = Some ry -> q < num_computed ry + cnt y (firstn k batch) ->
     nth_error (block_table ry) (q / block_size) = Some b -> q mod block_size = o -> False) ->
  (forall y ry q, requests s y = Some ry -> q < num_computed ry + cnt y (firstn k batch) ->
     window_released ry <= q / block_size ->
     nth_error (window_table ry) (q / block_size) = Some b -> q mod block_size = o -> False) ->
  fold_inv s batch k (upd_mem m b o v).
Proof.
  intros s batch k m b o v [Hc Hsl] Hnc Hfull Hwin. split.
  - intros b' pre Hb'. destruct (Hc b' pre Hb') as [j [Hl Hs]]. exists j. split; auto.
    intros o' Ho'. unfold upd_mem. destruct (Nat.eq_dec b' b) as [->|Hne].
    + congruence.
    + apply Nat.eqb_neq in Hne. rewrite Hne. simpl. apply Hs; auto.
  - intros y ry Hy. destruct (Hsl y ry Hy) as [Hs Hw]. split.
    + intros q Hq. rewrite read_upd_other; [apply Hs; auto|]. intros Hb Ho. apply (Hfull y ry q Hy Hq Hb Ho).
    + intros q Hq Hr Hl. rewrite read_upd_other; [apply Hw; auto|]. intros Hb Ho. apply (Hwin y ry q Hy Hq Hr Hb Ho).
Qed.

(* The window layers of a row at p >= num_computed read only held window entries. *)
Lemma wreads_of_inv : forall m r T n p,
  num_computed r <= p -> window_released r <= first_window_block (num_computed r) ->
  (window_local = true -> p < length (window_table r) * block_size) ->
  wslots_ok m r T n -> n <= S p ->
  wreads_ok m (block_table r) (window_view r) T p n.
Proof.
  intros m r T n p Hnc Hwr Hlen Hws Hn. split.
  - intros Ew q Hq Hf. unfold window_view. rewrite Ew. apply Hws; [lia| |].
    + transitivity (first_window_block (num_computed r)); auto.
      unfold first_window_block. apply Nat.div_le_mono; [exact block_size_pos|].
      unfold window_first in Hf. lia.
    + apply div_lt_blocks; auto. specialize (Hlen Ew). lia.
  - intros Ew. unfold window_view. rewrite Ew. reflexivity.
Qed.

(* One row: its KV is kv_at of its prefix, written into private slots of its block table
   and of its window table. *)
Lemma fold_step : forall s batch k row m,
  inv s -> rows_ok s batch -> nth_error batch k = Some row -> fold_inv s batch k m ->
  fold_inv s batch (S k)
    (if r_pad row then m else write_row row (kernel_kv batch k m) m).
Proof.
  intros s batch k row m Hinv Hrows Hk Hf.
  unfold fold_inv. rewrite (firstn_S_nth_error batch k row Hk).
  destruct (r_pad row) eqn:Hpad.
  - destruct Hf as [Hc Hsl]. split; auto. intros x r Hx. rewrite cnt_app.
    assert (H0 : cnt x [row] = 0) by (unfold cnt; simpl; unfold is_row_of; rewrite Hpad; reflexivity).
    rewrite H0, Nat.add_0_r. apply Hsl; auto.
  - destruct (Hrows k row Hk Hpad) as [r0 [Hr0 [_ [Hpos [HposT [HposTb [Htok [Htbl [Hwtbl Hwlen]]]]]]]]].
    set (x0 := r_req row) in *. set (p := r_pos row) in *.
    destruct (inv_requests _ Hinv _ _ Hr0) as [Ht Htb Hs Hp Ho Hwr Hwl Hws Hwp Hwn].
    pose proof Hf as [Hc0 Hsl0].
    destruct (Hsl0 x0 r0 Hr0) as [Hsx Hwx].
    assert (Hnc : num_computed r0 <= p) by lia.
    set (v := kv_at (seq_of r0) p).
    assert (Hv : kernel_kv batch k m = v).
    { rewrite (kernel_kv_contract batch k row m Hk). fold p. rewrite Htok, Htbl, Hwtbl.
      apply written_kv_is_prefix_function.
      - intros q Hq. apply Hsx. lia.
      - apply (wreads_of_inv m r0 (seq_of r0) _ p); auto. intros q Hq Hr Hl. apply Hwx; auto; lia.
      - exact HposT. }
    rewrite Hv.
    destruct (nth_error_lt _ (block_table r0) (p / block_size)) as [b Hb].
    { apply div_lt_blocks; auto. }
    destruct (Hp (p / block_size) b Hb) as [Hcb Hrb].
    { pose proof (pos_lt_block_end block_size p block_size_pos). lia. }
    assert (Hbh : In b (held r0)) by (eapply in_held_table; eauto).
    destruct (exclusive s x0 r0 x0 r0 b Hinv Hr0 Hbh Hrb Hr0 Hbh) as [_ Hocc].
    (* no covered position reads slot p mod B of b *)
    assert (Hfull_b : forall y ry q, requests s y = Some ry -> q < num_computed ry + cnt y (firstn k batch) ->
              nth_error (block_table ry) (q / block_size) = Some b -> q mod block_size = p mod block_size -> False).
    { intros y ry q Hy Hq Hbq Hmod.
      destruct (exclusive s x0 r0 y ry b Hinv Hr0 Hbh Hrb Hy (in_held_table _ _ _ Hbq)) as [-> _].
      rewrite Hr0 in Hy. inversion Hy; subst ry.
      pose proof (held_once_table _ _ _ _ Hocc Hb Hbq) as E.
      assert (q = p) by (apply (div_mod_inj block_size); auto). lia. }
    assert (Hwin_b : forall y ry q, requests s y = Some ry -> q < num_computed ry + cnt y (firstn k batch) ->
              window_released ry <= q / block_size ->
              nth_error (window_table ry) (q / block_size) = Some b -> q mod block_size = p mod block_size -> False).
    { intros y ry q Hy Hq Hr Hbq Hmod.
      destruct (exclusive s x0 r0 y ry b Hinv Hr0 Hbh Hrb Hy (in_held_window _ _ _ Hr Hbq)) as [-> _].
      rewrite Hr0 in Hy. inversion Hy; subst ry. apply (held_once_both _ _ _ _ Hocc Hb Hr Hbq). }
    assert (Hf1 : fold_inv s batch k (upd_mem m b (p mod block_size) v))
      by (apply fold_write_unread; auto).
    assert (Hcnt_x0 : cnt x0 [row] = 1).
    { unfold cnt. simpl. unfold is_row_of at 1. rewrite Hpad, Nat.eqb_refl. reflexivity. }
    assert (Hcnt_other : forall x, x <> x0 -> cnt x [row] = 0).
    { intros x Hne. unfold cnt. simpl. unfold is_row_of. rewrite Hpad. simpl.
      fold x0. apply Nat.eqb_neq in Hne. rewrite Nat.eqb_sym, Hne. reflexivity. }
    unfold write_row. rewrite Htbl, Hwtbl. fold p.
    assert (E1 : forall m', write m' (block_table r0) p v = upd_mem m' b (p mod block_size) v)
      by (intros m'; unfold write; rewrite Hb; reflexivity).
    rewrite E1.
    destruct (Bool.bool_dec window_local true) as [Ew|Ew].
    + (* window-local KV: the window table's slot is private too *)
      unfold window_view. rewrite Ew.
      destruct (nth_error_lt _ (window_table r0) (p / block_size)) as [wb Hwb].
      { apply div_lt_blocks; auto. }
      assert (Hwrp : window_released r0 <= p / block_size).
      { transitivity (first_window_block (num_computed r0)); auto.
        unfold first_window_block. apply Nat.div_le_mono; [exact block_size_pos|].
        pose proof (window_pos Ew). lia. }
      destruct (Hwp (p / block_size) wb Hwrp Hwb) as [Hcw Hrw].
      { pose proof (pos_lt_block_end block_size p block_size_pos). lia. }
      assert (Hwh : In wb (held r0)) by (eapply in_held_window; eauto).
      destruct (exclusive s x0 r0 x0 r0 wb Hinv Hr0 Hwh Hrw Hr0 Hwh) as [_ Hoccw].
      assert (Hbw : wb <> b) by (intros ->; apply (held_once_both _ _ _ _ Hocc Hb Hwrp Hwb)).
      assert (Hf2 : fold_inv s batch k (upd_mem (upd_mem m b (p mod block_size) v) wb (p mod block_size) v)).
      { apply fold_write_unread; auto.
        - intros y ry q Hy Hq Hbq Hmod.
          destruct (exclusive s x0 r0 y ry wb Hinv Hr0 Hwh Hrw Hy (in_held_table _ _ _ Hbq)) as [-> _].
          rewrite Hr0 in Hy. inversion Hy; subst ry. apply (held_once_both _ _ _ _ Hoccw Hbq Hwrp Hwb).
        - intros y ry q Hy Hq Hr Hbq Hmod.
          destruct (exclusive s x0 r0 y ry wb Hinv Hr0 Hwh Hrw Hy (in_held_window _ _ _ Hr Hbq)) as [-> _].
          rewrite Hr0 in Hy. inversion Hy; subst ry.
          pose proof (held_once_window _ _ _ _ Hoccw Hwrp Hwb Hr Hbq) as E.
          assert (q = p) by (apply (div_mod_inj block_size); auto). lia. }
      assert (E2 : forall m', write m' (window_table r0) p v = upd_mem m' wb (p mod block_size) v)
        by (intros m'; unfold write; rewrite Hwb; reflexivity).
      rewrite E2.
      destruct Hf2 as [Hc2 Hsl2]. split; auto. intros x r Hx. rewrite cnt_app.
      destruct (Nat.eq_dec x x0) as [->|Hne].
      * rewrite Hr0 in Hx. inversion Hx; subst r; clear Hx. rewrite Hcnt_x0.
        destruct (Hsl2 x0 r0 Hr0) as [Hs2 Hw2]. split.
        -- intros q Hq. destruct (Nat.eq_dec q p) as [->|Hqp].
           ++ rewrite read_upd_other by congruence. apply read_upd_same; auto.
           ++ apply Hs2. lia.
        -- intros q Hq Hr Hl. destruct (Nat.eq_dec q p) as [->|Hqp].
           ++ apply read_upd_same; auto.
           ++ apply Hw2; auto. lia.
      * rewrite (Hcnt_other x Hne), Nat.add_0_r. apply Hsl2; auto.
    + (* without: the window layers write the same slot of the block table *)
      apply Bool.not_true_is_false in Ew. unfold window_view. rewrite Ew.
      rewrite E1.
      assert (Hf2 : fold_inv s batch k (upd_mem (upd_mem m b (p mod block_size) v) b (p mod block_size) v))
        by (apply fold_write_unread; auto).
      destruct Hf2 as [Hc2 Hsl2]. split; auto. intros x r Hx. rewrite cnt_app.
      destruct (Nat.eq_dec x x0) as [->|Hne].
      * rewrite Hr0 in Hx. inversion Hx; subst r; clear Hx. rewrite Hcnt_x0.
        destruct (Hsl2 x0 r0 Hr0) as [Hs2 Hw2]. split.
        -- intros q Hq. destruct (Nat.eq_dec q p) as [->|Hqp].
           ++ apply read_upd_same; auto.
           ++ apply Hs2. lia.
        -- intros q Hq Hr Hl. exfalso. destruct (Hwn Ew) as [E _]. rewrite E in Hl. simpl in Hl. lia.
      * rewrite (Hcnt_other x Hne), Nat.add_0_r. apply Hsl2; auto.
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

Lemma verify_window_early : forall batch m x d r,
  window_table (verify batch m x r d) = window_table r /\
  window_released (verify batch m x r d) = window_released r.
Proof.
  intros batch m x d. induction d as [|d0 d IH]; intros r; cbn [verify];
    destruct (find_row x (length (tokens r) - 1) batch 0); auto.
  destruct (Nat.eqb d0 _); auto. destruct (IH (emit r (sample (kernel_logits batch n m) (sampler r)
    (length (outputs r)) (tokens r)) (kernel_logits batch n m))) as [E1 E2]. rewrite E1, E2. auto.
Qed.

Lemma advance_held : forall batch m x r, held (advance batch m x r) = held r.
Proof.
  intros. unfold advance, held. destruct (find_row _ _ _ _); [|reflexivity].
  destruct (verify_window_early batch m x (draft r) r) as [E1 E2]. simpl. rewrite E1, E2. reflexivity.
Qed.

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
     r_pos row < N /\ r_tok row = nth (r_pos row) Sq 0 /\ r_table row = tbl /\
     wreads_ok m tbl (r_wtable row) Sq (r_pos row) (S (r_pos row))) ->
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
       rewrite Nat.sub_0_r in Hk; destruct (Hrow k row Hk Hr) as [HpN [Htok [Htbl Hw]]];
       rewrite Hpos in Hw;
       assert (Hlg : kernel_logits batch k m = F_D (tokens r))
         by (rewrite (kernel_logits_contract batch k row m Hk), Htok, Htbl, Hpos;
             rewrite logits_are_F_D by ((intros q Hq; apply Hsl; lia) || exact Hw ||
                                        (rewrite <- HS, app_length; lia));
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

Lemma wslots_ok_seq : forall m r,
  num_computed r <= length (tokens r) ->
  wslots_ok m r (tokens r) (num_computed r) -> wslots_ok m r (seq_of r) (num_computed r).
Proof. intros m r Hn Hs q Hq Hr Hl. unfold seq_of. rewrite kv_at_app by lia. apply Hs; auto. Qed.

Lemma verify_window : forall batch m x d r,
  window_table (verify batch m x r d) = window_table r /\
  window_released (verify batch m x r d) = window_released r.
Proof.
  intros batch m x d. induction d as [|d0 d IH]; intros r; cbn [verify];
    destruct (find_row x (length (tokens r) - 1) batch 0); auto.
  destruct (Nat.eqb d0 _); auto. destruct (IH (emit r (sample (kernel_logits batch n m) (sampler r)
    (length (outputs r)) (tokens r)) (kernel_logits batch n m))) as [E1 E2]. rewrite E1, E2. auto.
Qed.

(* After the pass: the request's logits, if emitted, are F_D of its tokens. *)
Lemma advance_inv : forall s batch m x r,
  inv s -> rows_ok s batch -> bounds_ok s batch -> requests s x = Some r ->
  slots_ok m (block_table r) (seq_of r) (num_computed r + cnt x batch) ->
  wslots_ok m r (seq_of r) (num_computed r + cnt x batch) ->
  req_inv m (cached_prefix s) (ref_count s) (advance batch m x r).
Proof.
  intros s batch m x r Hinv Hrows Hbounds Hx Hslots Hwslots.
  destruct (inv_requests _ Hinv _ _ Hx) as [Ht Htb Hs Hp Ho Hwr Hwl Hws Hwp Hwn].
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
              r_pos row' < N /\ r_tok row' = nth (r_pos row') (seq_of r) 0 /\ r_table row' = block_table r /\
              wreads_ok m (block_table r) (r_wtable row') (seq_of r) (r_pos row') (S (r_pos row'))).
    { intros k' row' Hk' Hr'. pose proof Hr' as Hr''. apply andb_prop in Hr'' as [Hpad' Hreq'].
      apply negb_true_iff in Hpad'. apply Nat.eqb_eq in Hreq'.
      destruct (Hrows k' row' Hk' Hpad') as [r1 [Hr1 [_ [Hpos1 [_ [_ [Htok1 [Htbl1 [Hwtbl1 Hwlen1]]]]]]]]].
      rewrite Hreq', Hx in Hr1. inversion Hr1; subst r1; clear Hr1.
      pose proof (cnt_firstn_lt batch k' row' x Hk' Hr'). rewrite Hreq' in Hpos1.
      split; [unfold N; lia|]. split; [auto|]. split; [auto|]. rewrite Hwtbl1.
      apply (wreads_of_inv m r (seq_of r) _ (r_pos row')); auto; [lia|].
      intros q Hq Hr2 Hl2. apply Hwslots; auto. unfold N. lia. }
    destruct (verify_spec batch m x (block_table r) (seq_of r) N Hslots Hb1 Hrows_x (draft r) r
                eq_refl Hne Ho) as [Ho' [Hl' [Hpre' Hle']]].
    destruct (verify_window batch m x (draft r) r) as [Ew1 Ew2].
    set (r' := verify batch m x r (draft r)) in *.
    assert (Hkv : forall q, q < length (tokens r') - 1 -> kv_at (seq_of r) q = kv_at (tokens r') q).
    { intros q Hq. rewrite <- (kv_at_firstn (tokens r') (length (tokens r') - 1)) by lia.
      rewrite Hpre'. symmetry. apply kv_at_firstn; lia. }
    constructor; rewrite ?tokens_set_table; cbn [num_computed block_table set_table window_table window_released].
    + lia.
    + lia.
    + intros q Hq. rewrite (Hslots q) by lia. f_equal. apply Hkv. lia.
    + intros j b Hj Hlt'. apply (Hp j); auto. lia.
    + apply outputs_ok_set_table; auto.
    + rewrite Ew2. pose proof (fwb_mono (num_computed r) (Nat.min N (length (tokens r') - 1))). lia.
    + rewrite Ew1, Ew2. exact Hwl.
    + intros q Hq Hr Hl. cbn [window_table window_released set_table num_computed] in *.
      rewrite Ew1, Ew2 in *. rewrite (Hwslots q) by (auto; lia).
      f_equal. apply Hkv. lia.
    + intros j b Hr Hj Hlt'. cbn [window_table window_released set_table num_computed] in *.
      rewrite Ew1, Ew2 in *. apply (Hwp j); auto. lia.
    + intros E. rewrite Ew1, Ew2. apply Hwn; auto.
  - destruct Hb3 as [Hb3|[_ Hb3]]; [|contradiction].
    constructor; rewrite ?tokens_set_table; simpl; try lia.
    + intros q Hq. rewrite (Hslots q Hq). unfold seq_of. rewrite kv_at_app by lia. reflexivity.
    + intros j b Hj Hlt'. apply (Hp j); auto. lia.
    + apply outputs_ok_set_table; auto.
    + pose proof (fwb_mono (num_computed r) N). lia.
    + intros q Hq Hr Hl. simpl in *. rewrite (Hwslots q) by (auto; lia). unfold seq_of.
      rewrite kv_at_app by lia. reflexivity.
    + intros j b Hr Hj Hlt'. simpl in *. apply (Hwp j); auto. lia.
    + apply Hwn.
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
      split; [apply slots_ok_seq|apply wslots_ok_seq]; auto. }
  unfold fold_inv in Hf. rewrite firstn_all in Hf. destruct Hf as [Hc Hsl].
  constructor; simpl.
  - apply (inv_nodup _ Hinv).
  - intros x. rewrite (inv_ids _ Hinv). destruct (requests s x); simpl; split; congruence.
  - intros b. rewrite (inv_ref_count _ Hinv). unfold held_of. apply sumf_ext. intros y _.
    destruct (requests s y); simpl; [rewrite advance_held|]; reflexivity.
  - exact Hc.
  - intros x r' Hx'. destruct (requests s x) as [r|] eqn:Hx; simpl in Hx'; [|discriminate].
    inversion Hx'; subst r'. destruct (Hsl x r Hx). apply (advance_inv s); auto.
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
      split; [apply slots_ok_seq|apply wslots_ok_seq]; auto. }
  unfold fold_inv in Hf. rewrite firstn_all in Hf. destruct Hf as [_ Hsl].
  destruct (Hrows k row Hk Hpad) as [r [Hr [_ [Hpos [HposT [_ [Htok [Htbl [Hwtbl Hwlen]]]]]]]]].
  destruct (inv_requests _ Hinv _ _ Hr) as [Ht Htb Hs Hp Ho Hwr Hwl Hws Hwp Hwn].
  destruct (Hsl _ _ Hr) as [Hs1 Hw1].
  pose proof (cnt_firstn_lt batch k row (r_req row) Hk) as Hlt.
  unfold is_row_of in Hlt. rewrite Hpad, Nat.eqb_refl in Hlt. simpl in Hlt.
  specialize (Hlt eq_refl).
  exists r. split; auto.
  rewrite (kernel_logits_contract batch k row _ Hk), Htok, Htbl, Hwtbl.
  apply logits_are_F_D; auto.
  - intros q Hq. apply Hs1. lia.
  - apply (wreads_of_inv _ r (seq_of r) _ (r_pos row)); auto; [lia|].
    intros q Hq Hr2 Hl2. apply Hw1; auto. lia.
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
  - apply inv_window_allocate; auto.
  - apply inv_window_hit; auto.
  - apply inv_window_hole; auto.
  - eapply inv_window_register; eauto.
  - apply inv_window_release; auto.
  - apply inv_window_truncate; auto.
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
Lemma nonvacuous : window_local = false -> 0 < num_blocks ->
  forall (m0 : Mem) (t : Token) (ss : SamplerState),
  exists s r, reachable s /\ requests s 0 = Some r /\ length (outputs r) = 1.
Proof.
  intros Hwl Hnb m0 t ss.
  assert (Hne : [t] <> []) by discriminate.
  pose proof (reach_step _ _ (reach_init m0)
                (step_arrive (init_state m0) 0 [t] ss (fun H => H) Hne)) as R1.
  match type of R1 with reachable ?s => set (s1 := s) in R1 end.
  set (r1 := mkRequest [t] ss [] [] 0 [] false [] [] 0).
  pose proof (reach_step _ _ R1 (step_allocate s1 0 r1 0 eq_refl eq_refl Hnb eq_refl)) as R2.
  match type of R2 with reachable ?s => set (s2 := s) in R2 end.
  set (r2 := set_table r1 ([] ++ [0]) 0 false).
  set (batch := [mkRow 0 false 0 t [0] [0]]).
  assert (Hrows : rows_ok s2 batch).
  { intros k row Hk Hpad. destruct k as [|k]; [|destruct k; discriminate].
    simpl in Hk. inversion Hk; subst row. exists r2. unfold window_view. rewrite Hwl.
    repeat split; simpl; try reflexivity; try lia. }
  assert (Hbounds : bounds_ok s2 batch).
  { intros x r Hx. destruct (Nat.eq_dec x 0) as [->|Hx0].
    - unfold s2, s1 in Hx. simpl in Hx. inversion Hx; subst r. unfold batch, cnt. simpl. lia.
    - unfold s2, s1 in Hx. simpl in Hx. unfold upd in Hx. apply Nat.eqb_neq in Hx0. rewrite Hx0 in Hx.
      discriminate. }
  pose proof (reach_step _ _ R2 (step_forward s2 batch Hrows Hbounds)) as R3.
  eexists. eexists. split; [exact R3|]. split; [reflexivity|]. reflexivity.
Qed.

(* With window-local KV too: the request's window table gets a block of its own, and the
   forward step writes through both tables and emits a token. *)
Lemma nonvacuous_window : window_local = true -> 1 < num_blocks ->
  forall (m0 : Mem) (t : Token) (ss : SamplerState),
  exists s r, reachable s /\ requests s 0 = Some r /\ length (outputs r) = 1 /\
              window_table r = [1].
Proof.
  intros Hwl Hnb m0 t ss.
  assert (Hne : [t] <> []) by discriminate.
  pose proof (reach_step _ _ (reach_init m0)
                (step_arrive (init_state m0) 0 [t] ss (fun H => H) Hne)) as R1.
  match type of R1 with reachable ?s => set (s1 := s) in R1 end.
  set (r1 := mkRequest [t] ss [] [] 0 [] false [] [] 0).
  pose proof (reach_step _ _ R1 (step_allocate s1 0 r1 0 eq_refl eq_refl ltac:(lia) eq_refl)) as R2.
  match type of R2 with reachable ?s => set (s2 := s) in R2 end.
  set (r2 := set_table r1 ([] ++ [0]) 0 false).
  pose proof (reach_step _ _ R2 (step_window_allocate s2 0 r2 1 Hwl eq_refl eq_refl Hnb eq_refl
                                   ltac:(simpl; lia))) as R3.
  match type of R3 with reachable ?s => set (s3 := s) in R3 end.
  set (r3 := set_window r2 ([] ++ [1]) 0).
  set (batch := [mkRow 0 false 0 t [0] [1]]).
  assert (Hrows : rows_ok s3 batch).
  { intros k row Hk Hpad. destruct k as [|k]; [|destruct k; discriminate].
    simpl in Hk. inversion Hk; subst row. exists r3. unfold window_view. rewrite Hwl.
    repeat split; simpl; try reflexivity; try lia. }
  assert (Hbounds : bounds_ok s3 batch).
  { intros x r Hx. destruct (Nat.eq_dec x 0) as [->|Hx0].
    - unfold s3 in Hx. simpl in Hx. inversion Hx; subst r. unfold batch, cnt. simpl. lia.
    - unfold s3, s2, s1 in Hx. simpl in Hx. unfold upd in Hx. apply Nat.eqb_neq in Hx0. rewrite Hx0 in Hx.
      discriminate. }
  pose proof (reach_step _ _ R3 (step_forward s3 batch Hrows Hbounds)) as R4.
  eexists. eexists. split; [exact R4|]. split; [reflexivity|]. split; reflexivity.
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
Lemma nonvacuous_speculation : window_local = false -> 1 < num_blocks -> forall (m0 : Mem) (t : Token) (ss : SamplerState),
  exists s batch r,
    reachable s /\ rows_ok s batch /\ bounds_ok s batch /\
    requests s 0 = Some r /\ outputs r = [] /\
    length (outputs (advance batch (write_rows batch 0 batch (kv_mem s)) 0 r)) = 2.
Proof.
  intros Hwl Hnb m0 t ss.
  assert (Hne : [t] <> []) by discriminate.
  pose proof (reach_step _ _ (reach_init m0)
                (step_arrive (init_state m0) 0 [t] ss (fun H => H) Hne)) as R1.
  match type of R1 with reachable ?s => set (s1 := s) in R1 end.
  set (r1 := mkRequest [t] ss [] [] 0 [] false [] [] 0).
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
  set (batch := [mkRow 0 false 0 t [0; 1] [0; 1]; mkRow 0 false 1 d0 [0; 1] [0; 1]]).
  assert (Hrows : rows_ok s4 batch).
  { intros k row Hk Hpad.
    destruct k as [|[|k]]; simpl in Hk; try (destruct k; discriminate); inversion Hk; subst row;
      exists r4; split; try reflexivity; unfold window_view; rewrite Hwl;
      repeat split; simpl; try reflexivity; try lia; intros; congruence. }
  assert (Hbounds : bounds_ok s4 batch).
  { intros x r Hx. destruct (Nat.eq_dec x 0) as [->|Hx0].
    - unfold s4 in Hx. simpl in Hx. inversion Hx; subst r. unfold batch, cnt. simpl.
      split; [lia|]. split; [lia|]. right. split; [lia|discriminate].
    - unfold s4, s3, s2, s1 in Hx. simpl in Hx. unfold upd in Hx. apply Nat.eqb_neq in Hx0.
      rewrite Hx0 in Hx. discriminate. }
  destruct (every_row_logits s4 batch 0 (mkRow 0 false 0 t [0; 1] [0; 1]) R4 Hrows Hbounds eq_refl eq_refl)
    as [r [Hr Hlg]].
  simpl in Hr. inversion Hr; subst r. clear Hr.
  exists s4, batch, r4. split; [exact R4|]. split; [exact Hrows|]. split; [exact Hbounds|].
  split; [reflexivity|]. split; [reflexivity|].
  unfold advance, verify. cbn [find_row batch is_row_of r_pad r_req r_pos negb andb Nat.eqb length
                              tokens prompt outputs app r4 set_draft r3 set_table r2 r1 draft Nat.sub].
  rewrite Hlg. cbn [firstn seq_of tokens prompt outputs app r4 set_draft r3 set_table r2 r1 draft].
  fold d0. rewrite Nat.eqb_refl. reflexivity.
Qed.

(* Speculation with window-local KV is not vacuous either: with four physical blocks, a request
   with a one-token prompt and a WRONG draft gets a verify chunk of two rows written through both
   tables; the forward step emits the target's token and counts one position computed, and the
   window table is then rolled back past the rejected position (step_window_truncate). *)
Lemma nonvacuous_window_speculation : window_local = true -> 3 < num_blocks ->
  forall (m0 : Mem) (t : Token) (ss : SamplerState),
  exists s r, reachable s /\ requests s 0 = Some r /\ outputs r = [sample (F_D [t]) ss 0 [t]] /\
              num_computed r = 1 /\ block_table r = [0; 1] /\ window_table r = [2].
Proof.
  intros Hwl Hnb m0 t ss.
  assert (Hne : [t] <> []) by discriminate.
  pose proof (reach_step _ _ (reach_init m0)
                (step_arrive (init_state m0) 0 [t] ss (fun H => H) Hne)) as R1.
  match type of R1 with reachable ?s => set (s1 := s) in R1 end.
  set (r1 := mkRequest [t] ss [] [] 0 [] false [] [] 0).
  pose proof (reach_step _ _ R1 (step_allocate s1 0 r1 0 eq_refl eq_refl ltac:(lia) eq_refl)) as R2.
  match type of R2 with reachable ?s => set (s2 := s) in R2 end.
  set (r2 := set_table r1 ([] ++ [0]) 0 false).
  pose proof (reach_step _ _ R2 (step_allocate s2 0 r2 1 eq_refl eq_refl ltac:(lia) eq_refl)) as R3.
  match type of R3 with reachable ?s => set (s3 := s) in R3 end.
  set (r3 := set_table r2 (block_table r2 ++ [1]) 0 false).
  pose proof (reach_step _ _ R3 (step_window_allocate s3 0 r3 2 Hwl eq_refl eq_refl ltac:(lia) eq_refl
                                   ltac:(simpl; lia))) as R4.
  match type of R4 with reachable ?s => set (s4 := s) in R4 end.
  set (r4 := set_window r3 (window_table r3 ++ [2]) (window_released r3)).
  pose proof (reach_step _ _ R4 (step_window_allocate s4 0 r4 3 Hwl eq_refl eq_refl ltac:(lia) eq_refl
                                   ltac:(simpl; lia))) as R5.
  match type of R5 with reachable ?s => set (s5 := s) in R5 end.
  set (r5 := set_window r4 (window_table r4 ++ [3]) (window_released r4)).
  set (e0 := sample (F_D [t]) ss 0 [t]).
  set (d := S e0).
  assert (Hneq : Nat.eqb d e0 = false) by (apply Nat.eqb_neq; unfold d; lia).
  clearbody d.
  pose proof (reach_step _ _ R5 (step_draft s5 0 r5 [d] eq_refl eq_refl)) as R6.
  match type of R6 with reachable ?s => set (s6 := s) in R6 end.
  set (r6 := set_draft r5 [d]).
  set (batch := [mkRow 0 false 0 t [0; 1] [2; 3]; mkRow 0 false 1 d [0; 1] [2; 3]]).
  assert (Hrows : rows_ok s6 batch).
  { intros k row Hk Hpad.
    destruct k as [|[|k]]; simpl in Hk; try (destruct k; discriminate); inversion Hk; subst row;
      exists r6; split; try reflexivity; unfold window_view; rewrite Hwl;
      repeat split; simpl; try reflexivity; try lia. }
  assert (Hbounds : bounds_ok s6 batch).
  { intros x r Hx. destruct (Nat.eq_dec x 0) as [->|Hx0].
    - unfold s6 in Hx. simpl in Hx. inversion Hx; subst r. unfold batch, cnt. simpl.
      split; [lia|]. split; [lia|]. right. split; [lia|discriminate].
    - unfold s6, s5, s4, s3, s2, s1 in Hx. simpl in Hx. unfold upd in Hx. apply Nat.eqb_neq in Hx0.
      rewrite Hx0 in Hx. discriminate. }
  destruct (every_row_logits s6 batch 0 (mkRow 0 false 0 t [0; 1] [2; 3]) R6 Hrows Hbounds eq_refl eq_refl)
    as [r [Hr Hlg]].
  simpl in Hr. inversion Hr; subst r. clear Hr.
  pose proof (reach_step _ _ R6 (step_forward s6 batch Hrows Hbounds)) as R7.
  match type of R7 with reachable ?s => set (s7 := s) in R7 end.
  set (r7 := advance batch (write_rows batch 0 batch (kv_mem s6)) 0 r6).
  assert (E7 : requests s7 0 = Some r7) by reflexivity.
  assert (Hr7 : outputs r7 = [e0] /\ num_computed r7 = 1 /\ block_table r7 = [0; 1] /\
                window_table r7 = [2; 3] /\ window_released r7 = 0 /\ finished r7 = false).
  { unfold r7, advance, verify. cbn [find_row batch is_row_of r_pad r_req r_pos negb andb Nat.eqb length
                              tokens prompt outputs app r6 set_draft r5 r4 set_window r3 set_table r2 r1 draft
                              Nat.sub].
    rewrite Hlg. cbn [firstn seq_of tokens prompt outputs app r6 set_draft r5 r4 set_window r3 set_table r2 r1 draft
                      r_pos sampler].
    fold e0. rewrite Hneq. repeat split; reflexivity. }
  destruct Hr7 as [Ho7 [Hc7 [Hb7 [Hw7 [Hwr7 Hf7]]]]].
  pose proof (reach_step _ _ R7 (step_window_truncate s7 0 r7 1 Hwl E7 Hf7 ltac:(lia)
                                   ltac:(rewrite Hc7; lia))) as R8.
  eexists. eexists. split; [exact R8|]. split; [reflexivity|].
  cbn [set_window outputs num_computed block_table window_table].
  rewrite Ho7, Hc7, Hb7, Hw7. repeat split; reflexivity.
Qed.

End Engine.
