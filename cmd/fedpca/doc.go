// Command fedpca runs every fedpca role, and the demo and simulator. It only
// turns flags (and FEDPCA_* environment variables) into the role packages'
// Configs; the work is in the packages.
package main
