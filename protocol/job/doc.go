// Package job ties the protocol together: the job spec that fixes a
// computation (and whose SHA-256 is its identity, signed by the user), the
// checks made when a job is created, the step each role performs, and the
// result the user publishes.
//
// The role steps are pure functions over the protocol packages (schema,
// stats, he, dp, analysis); the daemons in owner/, proxy/, csp/ and user/ call
// them and add transport and storage, and the in-process tests call them with
// parties in slices. See docs/PROTOCOL.md for the protocol.
package job
