// Package mpc is the members' secret-shared fixed-point arithmetic over
// Z_2^128 (products, truncations, comparisons, the conversion from shares
// mod T, scalar and matrix functions, a Jacobi eigensolver) on which the
// components programs of protocol/eigen run. A program sees an *Engine;
// how the engine multiplies, truncates, masks and opens is its backend's,
// and the same program runs unchanged on either:
//
// The dealer's backend (NewEngine, NewPartyEngine; beaver.go, dealer.go):
// n >= 2 parties hold additive shares and use a dealer's correlated
// randomness, Beaver triples (Beaver 1991), truncation pairs and masks
// with shared bits, over a Net that sums the parties' shares of an
// opening. The dealer must collude with no party: with one it learns
// everything, and a dealer dealing wrong randomness steers the output.
//
// The replicated backend (NewReplicatedEngine, NewReplicatedPartyEngine;
// replicated.go, prss.go, peernet.go, boolean.go, triples.go): exactly
// three parties hold replicated shares (Araki, Furukawa, Lindell, Nof and
// Ohara, CCS 2016), x = x_0 + x_1 + x_2 with party i holding x_i and
// x_(i+1), and need no dealer: every component's randomness comes from an
// AES-256-CTR stream keyed by a key its two holders share (pseudorandom
// secret sharing; ReplicatedKeys). Entrywise products and ANDs are Beaver
// products on triples the parties make by resharing and check in batches
// before any is used (cut-and-choose with buckets: Furukawa, Lindell, Nof
// and Weinstein, EUROCRYPT 2017); matrix products are reshared and checked
// by a projection on a random public V before they are returned. Fixed
// point follows ABY3 (Mohassel and Rindal, CCS 2018) with an opened
// truncation whose mask is the sum of three parts drawn by the three
// pairs. Comparisons open x + r for r uniform over Z_2^128, the sum of
// three words drawn by the pairs, whose bits over Z_2 a ripple-carry
// adder makes bit-sliced (edaBits; boolean.go), compare c - r's borrow
// over Z_2 (Catrina and de Hoogh 2010; bit-sliced by a tree for many
// values, a value's bits in a word for a few) and bring the result back
// to Z_2^128 by opening it masked with a random bit held both ways (a
// daBit, Rotaru and Wood 2019: the exclusive or of three bits drawn by the
// pairs, made over Z_2^128 by two rounds of products), and the conversion
// from shares mod T moves one party's share to another, masked, reshares
// the two sums and subtracts T after a comparison of their sum with T.
//
// What the replicated backend gives, honest majority (one party of three
// deviating, the others following the protocol), security with abort:
// one party learns nothing but values it can simulate (resharing messages
// are masked by a stream it does not hold; opened values are uniform (a
// Beaver product's, a comparison's, whatever the value holds) or hide the
// value to 2^(1 - Lambda) (a truncation's, if it is below 2^L), under
// AES's pseudorandomness; no coalition with the proxy changes that, since
// the proxy only relays sealed messages), and a deviating party is
// caught before any output: openings are checked (the component a party
// lacks comes from one of its holders and a SHA-256 hash of it from the
// other; the user's CombineReplicated checks the output's components the
// same way), no error can enter a Beaver product on a right triple, a
// batch of triples with a spoilt one passes its check with probability
// below 2^-48, and a matrix product with an error passes its projection
// with probability at most 2^-48 (so values stay in the range their
// truncations' masks hide: no error can be multiplied by a secret and
// opened). What no check sees is a party's own input: the conversion's
// terms mod T, which a member can shift (integrity; in exact mode, with
// the user colluding, more: PROTOCOL 7.2). The dealer backend has none of
// these checks.
//
// Messages of the replicated backend, per round, with prev = i - 1 and
// next = i + 1 (mod 3) for party i, one PeerNet Exchange per round:
//
//	resharing (matrix products with their check's triples, a batch of
//	triples, the conversion's input):
//	  i -> prev: the new component i of every value of the round
//	  i -> next: empty
//	opening (truncations, comparisons, a comparison's masked result
//	over Z_2, Beaver products' x - a and y - b over Z_2^128 or Z_2, a
//	coin with the checks' openings, reveals):
//	  i -> prev: component i + 1 of every opened value (prev lacks it)
//	  i -> next: 2 words, SHA-256 of component i (next lacks it too),
//	             bound to the round
//	zero check (a batch of triples', a round of matrix products'):
//	  i -> next: 2 words, SHA-256 of the sum of its two components
//	  i -> prev: empty
//	a conversion's move (the first round of FromModT, per chunk):
//	  2 -> 1: party 2's shares mod T plus a mask mod T, one word each
//	  every other message empty
//
// A round's words are the concatenation of its values' entries, row-major,
// in the order of the operations' operands; both ends know every length
// from the program, and the engine checks the lengths it receives.
// Cost counts each party's rounds and the bytes it sends (16 a word).
package mpc
