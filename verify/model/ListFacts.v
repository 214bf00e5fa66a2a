(* ListFacts: generic facts about lists, sums and block arithmetic used by EngineModel.v.
   Nothing here mentions the engine; everything is proven from Coq's standard library. *)
Require Import List Arith Lia.
Import ListNotations.

(* ---------- sums over a list of request ids ---------- *)

(* sumf f l = f l[0] + f l[1] + ... *)
Definition sumf (f : nat -> nat) (l : list nat) : nat :=
  fold_right (fun x acc => f x + acc) 0 l.

Lemma sumf_ext : forall f g l,
  (forall y, In y l -> f y = g y) -> sumf f l = sumf g l.
Proof.
  intros f g l H; induction l as [|a l IH]; simpl; auto.
  rewrite H by (left; auto). rewrite IH; auto. intros y Hy; apply H; right; auto.
Qed.

Lemma sumf_update : forall f g l x,
  NoDup l -> In x l -> (forall y, y <> x -> f y = g y) ->
  sumf g l + f x = sumf f l + g x.
Proof.
  intros f g l x Hnd Hin Hfg; induction l as [|a l IH]; simpl in *; [contradiction|].
  inversion Hnd as [|a' l' Hnotin Hnd']; subst.
  destruct (Nat.eq_dec a x) as [->|Hne].
  - rewrite (sumf_ext g f l). lia.
    intros y Hy; symmetry; apply Hfg; intro; subst; contradiction.
  - destruct Hin as [Hax|Hin]; [contradiction|].
    rewrite (Hfg a Hne). specialize (IH Hnd' Hin). lia.
Qed.

Lemma sumf_le : forall f l x, In x l -> f x <= sumf f l.
Proof.
  intros f l x Hin; induction l as [|a l IH]; simpl in *; [contradiction|].
  destruct Hin as [->|Hin]; [lia|]. specialize (IH Hin); lia.
Qed.

Lemma sumf_le2 : forall f l x y,
  NoDup l -> In x l -> In y l -> x <> y -> f x + f y <= sumf f l.
Proof.
  intros f l x y Hnd Hx Hy Hxy; induction l as [|a l IH]; simpl in *; [contradiction|].
  inversion Hnd as [|a' l' Hnotin Hnd']; subst.
  destruct Hx as [->|Hx]; destruct Hy as [->|Hy].
  - contradiction.
  - pose proof (sumf_le f l y Hy); lia.
  - pose proof (sumf_le f l x Hx); lia.
  - specialize (IH Hnd' Hx Hy); lia.
Qed.

(* ---------- occurrences ---------- *)

Definition occ (l : list nat) (x : nat) : nat := count_occ Nat.eq_dec l x.

Lemma occ_app : forall l1 l2 x, occ (l1 ++ l2) x = occ l1 x + occ l2 x.
Proof.
  intros l1 l2 x; induction l1 as [|a l1 IH]; simpl; auto.
  unfold occ in *; simpl. destruct (Nat.eq_dec a x); rewrite IH; lia.
Qed.

Lemma occ_In : forall l x, In x l -> occ l x >= 1.
Proof. intros l x H. apply (count_occ_In Nat.eq_dec) in H. unfold occ; lia. Qed.

Lemma occ_single : forall x y, occ [x] y = if Nat.eq_dec x y then 1 else 0.
Proof. intros; unfold occ; simpl; destruct (Nat.eq_dec x y); auto. Qed.

(* An element occurring once sits at one index only. *)
Lemma occ_one_index : forall l x j j',
  occ l x = 1 -> nth_error l j = Some x -> nth_error l j' = Some x -> j = j'.
Proof.
  induction l as [|a l IH]; intros x j j' Hc Hj Hj'; [destruct j; discriminate|].
  unfold occ in Hc; simpl in Hc.
  destruct j as [|j]; destruct j' as [|j']; simpl in Hj, Hj'; auto.
  - inversion Hj; subst. destruct (Nat.eq_dec x x) as [_|]; [|contradiction].
    apply nth_error_In in Hj'. apply (count_occ_In Nat.eq_dec) in Hj'. lia.
  - inversion Hj'; subst. destruct (Nat.eq_dec x x) as [_|]; [|contradiction].
    apply nth_error_In in Hj. apply (count_occ_In Nat.eq_dec) in Hj. lia.
  - f_equal. destruct (Nat.eq_dec a x) as [->|Hne].
    + apply nth_error_In in Hj. apply (count_occ_In Nat.eq_dec) in Hj. lia.
    + eapply IH; eauto.
Qed.

(* ---------- lists ---------- *)

Lemma firstn_S_nth : forall (A : Type) (l : list A) n d,
  n < length l -> firstn (S n) l = firstn n l ++ [nth n l d].
Proof.
  intros A l; induction l as [|a l IH]; intros n d Hn; simpl in *; [lia|].
  destruct n as [|n]; simpl; auto. f_equal. apply IH; lia.
Qed.

Lemma firstn_app_le : forall (A : Type) (l u : list A) n,
  n <= length l -> firstn n (l ++ u) = firstn n l.
Proof.
  intros A l u n Hn. rewrite firstn_app.
  replace (n - length l) with 0 by lia. simpl. apply app_nil_r.
Qed.

Lemma nth_error_lt : forall (A : Type) (l : list A) n,
  n < length l -> exists a, nth_error l n = Some a.
Proof.
  intros A l n Hn. destruct (nth_error l n) eqn:E; eauto.
  apply nth_error_None in E; lia.
Qed.

Lemma nth_error_snoc_last : forall (A : Type) (l : list A) a,
  nth_error (l ++ [a]) (length l) = Some a.
Proof.
  intros. rewrite nth_error_app2 by lia. rewrite Nat.sub_diag. reflexivity.
Qed.

(* ---------- block arithmetic: position q lives in block q / B at offset q mod B ---------- *)

Lemma div_mod_inj : forall B q p,
  q / B = p / B -> q mod B = p mod B -> q = p.
Proof.
  intros B q p Hd Hm.
  rewrite (Nat.div_mod_eq q B), (Nat.div_mod_eq p B), Hd, Hm. reflexivity.
Qed.

Lemma pos_lt_block_end : forall B q, B <> 0 -> q < (q / B + 1) * B.
Proof.
  intros B q HB. pose proof (Nat.div_mod_eq q B). pose proof (Nat.mod_upper_bound q B HB).
  rewrite Nat.mul_add_distr_r. rewrite Nat.mul_comm in H. lia.
Qed.

Lemma block_start_le : forall B q, B <> 0 -> q / B * B <= q.
Proof.
  intros B q HB. pose proof (Nat.div_mod_eq q B). rewrite Nat.mul_comm. lia.
Qed.

Lemma div_of_block_offset : forall B j o, B <> 0 -> o < B -> (j * B + o) / B = j.
Proof.
  intros B j o HB Ho. rewrite Nat.div_add_l by auto. rewrite Nat.div_small by auto. lia.
Qed.

Lemma mod_of_block_offset : forall B j o, B <> 0 -> o < B -> (j * B + o) mod B = o.
Proof.
  intros B j o HB Ho. rewrite Nat.add_comm, Nat.mod_add by auto. apply Nat.mod_small; auto.
Qed.

Lemma div_lt_blocks : forall B q n, B <> 0 -> q < n * B -> q / B < n.
Proof.
  intros B q n HB H. apply Nat.div_lt_upper_bound; auto. rewrite Nat.mul_comm; auto.
Qed.

(* ---------- prefixes and suffixes of a list ---------- *)

Lemma nth_error_firstn_lt : forall (A : Type) (l : list A) n j,
  j < n -> nth_error (firstn n l) j = nth_error l j.
Proof.
  intros A l; induction l as [|a l IH]; intros n j Hj; destruct n as [|n]; try lia;
    destruct j as [|j]; simpl; auto. apply IH; lia.
Qed.

Lemma nth_error_firstn_some : forall (A : Type) (l : list A) n j a,
  nth_error (firstn n l) j = Some a -> j < n /\ nth_error l j = Some a.
Proof.
  intros A l n j a H. assert (Hj : j < length (firstn n l)) by (apply nth_error_Some; congruence).
  rewrite firstn_length in Hj. split; [lia|]. rewrite <- H. symmetry. apply nth_error_firstn_lt. lia.
Qed.

Lemma In_skipn_In : forall (A : Type) (l : list A) n a, In a (skipn n l) -> In a l.
Proof.
  intros A l n a H. rewrite <- (firstn_skipn n l). apply in_or_app. right. exact H.
Qed.

Lemma nth_error_skipn_add : forall (A : Type) (l : list A) n i,
  nth_error (skipn n l) i = nth_error l (n + i).
Proof.
  intros A l; induction l as [|a l IH]; intros n i; destruct n as [|n]; simpl; auto.
  destruct i; reflexivity.
Qed.

Lemma skipn_app_le : forall (A : Type) (l u : list A) n,
  n <= length l -> skipn n (l ++ u) = skipn n l ++ u.
Proof.
  intros A l; induction l as [|a l IH]; intros u n Hn; destruct n as [|n]; simpl in *; auto; try lia.
  apply IH; lia.
Qed.

Lemma skipn_nth_cons : forall (A : Type) (l : list A) n a,
  nth_error l n = Some a -> skipn n l = a :: skipn (S n) l.
Proof.
  intros A l; induction l as [|b l IH]; intros n a H; destruct n as [|n]; simpl in *; try discriminate.
  - inversion H; reflexivity.
  - apply IH; auto.
Qed.

Lemma occ_two : forall l1 l2 x, In x l1 -> In x l2 -> 2 <= occ (l1 ++ l2) x.
Proof. intros l1 l2 x H1 H2. rewrite occ_app. pose proof (occ_In _ _ H1). pose proof (occ_In _ _ H2). lia. Qed.

(* Truncating a list at n, a suffix from m <= n of the kept part and the dropped part make up the
   suffix from m (a window table's held entries, split by a roll-back). *)
Lemma skipn_firstn_skipn : forall (A : Type) (l : list A) m n,
  m <= n -> skipn m (firstn n l) ++ skipn n l = skipn m l.
Proof.
  intros A l; induction l as [|a l IH]; intros m n Hmn.
  - destruct m, n; reflexivity.
  - destruct n as [|n].
    + replace m with 0 by lia. reflexivity.
    + destruct m as [|m]; simpl.
      * f_equal. apply firstn_skipn.
      * apply IH. lia.
Qed.
