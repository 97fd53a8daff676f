function fine() { return 1 }
function broken( {
  let x = ;
  class Nope { m() {} }
}}}
