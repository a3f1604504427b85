// Package reference is the discovery fold as it stood before the publish
// path's work on its cost (issue #14, main at ea6f8d7): its fold code
// unchanged but for the package name (the feed's Interests and FeedKinds,
// and FirstProfile, copied alone). The discovery tests fold the same random
// streams into it and into discovery's Fold and require every answer and
// the digest to be equal (D6): the optimised fold must answer exactly as
// this one did. It is test support; nothing else imports it.
package reference
