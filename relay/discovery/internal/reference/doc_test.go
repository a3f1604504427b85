// Package reference is the test oracle for the discovery fold: an earlier,
// unoptimised copy of the fold's code, kept only in test files so that
// nothing in the production build can import it. equiv_test.go folds the
// same random streams into it and into discovery's Fold and requires every
// answer and the digest to be equal (SPEC D6): the optimised fold must
// answer exactly as this one does.
package reference
